import { createExecutionContext } from 'cloudflare:test'
import { env } from 'cloudflare:workers'
import type { LogLevel } from '@notify-edge/contracts'
import { describe, expect, it, vi } from 'vitest'
import worker from '../src/index.ts'
import { createLogger } from '../src/log.ts'
import { fieldsOfLine, personalFields, REDACTION_EVENT, scrubbedFields } from '../support/log-redaction.ts'
import { leaksIn } from '../support/privacy.ts'

/**
 * One logging vocabulary for the Worker and the bridge: every line is written
 * by a logger that scrubs it with the shared list (src/log.ts, bridge/src/log.ts),
 * called with a stable event name and its fields. The bridge's logger gets the
 * same fields as the Worker's below and must write the same (bridge/test/log.test.ts).
 */

const sources = import.meta.glob(
  ['../src/**/*.{ts,tsx}', '../bridge/src/**/*.ts', '../packages/contracts/src/**/*.ts'],
  {
    query: '?raw',
    import: 'default',
    eager: true,
  },
) as Record<string, string>

/** The bridge's events are listed for operators in docs/bridge.md. */
const bridgeDoc = Object.values(
  import.meta.glob('../docs/bridge.md', { query: '?raw', import: 'default', eager: true }) as Record<string, string>,
)[0]

/** The one file allowed to write to the console: the Worker's logger (the bridge's writes through pino). */
const LOGGER = '../src/log.ts'

const RAW_CONSOLE = /\bconsole\s*\.\s*(log|info|warn|error|debug|trace|dir|table)\s*\(/g

/** A call of a logger method: `log.warn(`, `this.#log.info(`, `logger.error(`, `loggerFor(c.env).error(`, `createLogger(level).info(`. */
const LOG_CALL = /(?:\blog|#log|\blogger|\b(?:loggerFor|createLogger)\([^()]*\))\.(?:debug|info|warn|error)\(/g

const NAME = "'[a-z][a-z0-9-]*(?:\\.[a-z][a-z0-9-]*)+'"
/** A stable event name: a literal `area.what`, one of two such literals, or a literal area with a computed outcome. */
const EVENT_NAME = new RegExp(
  `^(?:${NAME}|[^'\`?]+\\?\\s*${NAME}\\s*:\\s*${NAME}|\`[a-z][a-z0-9-]*\\.\\$\\{[^\`]+\\}\`)$`,
)

function lineOf(text: string, index: number): number {
  return text.slice(0, index).split('\n').length
}

/** The source text of a call's first argument, from `start` to the comma or parenthesis that ends it. */
function firstArgument(text: string, start: number): string {
  let depth = 0
  let quote: string | undefined
  for (let index = start; index < text.length; index += 1) {
    const char = text[index] as string
    if (quote) {
      if (char === '\\') index += 1
      else if (char === quote) quote = undefined
    } else if (char === "'" || char === '"' || char === '`') quote = char
    else if ('([{'.includes(char)) depth += 1
    else if (')]}'.includes(char)) {
      if (depth === 0) return text.slice(start, index).trim()
      depth -= 1
    } else if (char === ',' && depth === 0) return text.slice(start, index).trim()
  }
  return text.slice(start).trim()
}

/** Every log call of the sources: where it is and the source text of its event name. */
function logCalls(): { where: string; event: string }[] {
  return Object.entries(sources).flatMap(([file, text]) =>
    [...text.matchAll(LOG_CALL)].map((call) => ({
      where: `${file}:${lineOf(text, call.index)}`,
      event: firstArgument(text, call.index + call[0].length),
    })),
  )
}

describe('one logging vocabulary', () => {
  it('reads the sources of the Worker, the bridge and the contracts package', () => {
    // A glob that matched nothing would pass every test below.
    const files = Object.keys(sources)
    expect(files).toContain(LOGGER)
    expect(files).toContain('../bridge/src/main.ts')
    expect(files).toContain('../bridge/src/log.ts')
    expect(files).toContain('../src/console/app.tsx')
    expect(files).toContain('../packages/contracts/src/log.ts')
  })

  it('no source writes to the console but the Worker’s logger', () => {
    const raw = Object.entries(sources).flatMap(([file, text]) =>
      file === LOGGER
        ? []
        : [...text.matchAll(RAW_CONSOLE)].map((call) => `${file}:${lineOf(text, call.index)} ${call[0]}`),
    )
    expect(raw).toEqual([])
    // The scan itself: it finds the logger's own calls.
    expect([...(sources[LOGGER] ?? '').matchAll(RAW_CONSOLE)].length).toBeGreaterThan(0)
  })

  it('every log call of the Worker and the bridge names a stable event, `area.what`', () => {
    const calls = logCalls()
    expect(calls.filter(({ event }) => !EVENT_NAME.test(event))).toEqual([])
    // Both sides were read: the Worker makes most of the calls, the bridge its sources' and sink's.
    expect(calls.filter(({ where }) => where.startsWith('../src/')).length).toBeGreaterThan(50)
    expect(calls.filter(({ where }) => where.startsWith('../bridge/src/')).length).toBeGreaterThan(30)
  })

  it('the table of docs/bridge.md lists every event the bridge logs, and no other', () => {
    const logged = logCalls()
      .filter(({ where }) => where.startsWith('../bridge/src/'))
      .flatMap(({ event }) => [...event.matchAll(/'([a-z0-9.-]+)'/g)].map((name) => name[1] as string))
    // The first column of the table's rows, e.g. | `source.up`, `source.down` | info | …
    const documented = (bridgeDoc ?? '')
      .split('\n')
      .filter((line) => line.startsWith('| `'))
      .flatMap((line) => [...(line.split('|')[1] ?? '').matchAll(/`([a-z0-9.-]+)`/g)].map((name) => name[1] as string))
    expect(documented.length).toBeGreaterThan(30)
    expect([...new Set(documented)].sort()).toEqual([...new Set(logged)].sort())
  })

  it('the event-name rule refuses prose and the bridge’s old `(fields, prose)` order', () => {
    for (const refused of ["'sink failed; retrying'", '{ error }', "'source:connected'", 'name']) {
      expect(EVENT_NAME.test(refused)).toBe(false)
    }
    // The source text of a call's first argument, so a template literal's `${…}` is text here.
    // biome-ignore lint/suspicious/noTemplateCurlyInString: the source of a template literal, as the scan reads it
    const computed = '`dispatch.${outcome.how}`'
    for (const accepted of ["'source.connected'", "up ? 'source.up' : 'source.down'", computed]) {
      expect(EVENT_NAME.test(accepted)).toBe(true)
    }
  })
})

describe("the Worker's logger", () => {
  function capture(level: LogLevel) {
    const lines: { level: LogLevel; line: string }[] = []
    const log = createLogger(level, (at, line) => lines.push({ level: at, line }))
    return { log, lines }
  }

  it('redacts every key of the shared list, in any case and at any depth, as the bridge’s does', () => {
    const { log, lines } = capture('info')
    log.warn(REDACTION_EVENT, personalFields())
    expect(lines).toHaveLength(1)
    const line = JSON.parse(lines[0]?.line ?? '{}') as Record<string, unknown>
    expect(line).toMatchObject({ level: 'warn', event: REDACTION_EVENT })
    expect(fieldsOfLine(line)).toEqual(scrubbedFields())
    expect(leaksIn(lines[0]?.line ?? '')).toEqual([])
  })

  it('writes each line at its level, and none below the logger’s', () => {
    const { log, lines } = capture('warn')
    log.debug('test.quiet')
    log.info('test.quiet')
    log.warn('test.warned')
    log.error('test.failed')
    expect(lines.map(({ level, line }) => [level, JSON.parse(line).event])).toEqual([
      ['warn', 'test.warned'],
      ['error', 'test.failed'],
    ])
  })
})

describe("the console's errors", () => {
  it('an error a console page cannot answer is logged by the Worker’s logger, as console.unexpected', async () => {
    const errors = vi.spyOn(console, 'error').mockImplementation(() => {})
    try {
      // A variable the configuration refuses: every console page reads the configuration.
      const response = await worker.fetch(
        new Request('http://worker/console/sign-in'),
        { ...env, RETRY_DELAYS_SECONDS: 'soon' } as Env,
        createExecutionContext(),
      )
      expect(response.status).toBe(500)
      expect(await response.text()).toContain('See the Worker log.')
      const lines = errors.mock.calls.map(([line]) => JSON.parse(String(line)) as Record<string, unknown>)
      expect(lines).toContainEqual(
        expect.objectContaining({ level: 'error', event: 'console.unexpected', error: expect.any(Object) }),
      )
    } finally {
      errors.mockRestore()
    }
  })
})
