/**
 * The bridge's log lines: the Worker's call shape and the shared scrub. The
 * Worker's logger gets the same fields and must write the same in
 * test/log-vocabulary.test.ts.
 */
import assert from 'node:assert/strict'
import { Writable } from 'node:stream'
import { test } from 'node:test'
import { fieldsOfLine, personalFields, REDACTION_EVENT, scrubbedFields } from '../../support/log-redaction.ts'
import { leaksIn } from '../../support/privacy.ts'
import { createLogger, type Logger } from '../src/log.ts'

/** A logger at `level` writing into a string, and the lines it wrote so far, parsed. */
function capture(level: string): { log: Logger; text: () => string; lines: () => Record<string, unknown>[] } {
  let text = ''
  const stream = new Writable({
    write(chunk, _encoding, callback) {
      text += chunk
      callback()
    },
  })
  return {
    log: createLogger(level, stream),
    text: () => text,
    lines: () =>
      text
        .split('\n')
        .filter(Boolean)
        .map((line) => JSON.parse(line)),
  }
}

test('logs mask e-mail addresses and drop personal fields', () => {
  const { log, text } = capture('info')
  log.info('test.sent', {
    to: 'anna.client@example.com',
    displayName: 'Анна Клиент',
    reason: 'Нечитаемо',
    note: 'sent to anna.client@example.com',
  })
  assert.doesNotMatch(text(), /anna\.client@example\.com/)
  assert.match(text(), /a\*\*\*@example\.com/)
  assert.doesNotMatch(text(), /Анна Клиент|Нечитаемо/)
})

test('every key of the shared redaction list is redacted, in any case and at any depth, as the Worker redacts it', () => {
  const { log, text, lines } = capture('info')
  log.warn(REDACTION_EVENT, personalFields())
  const [line] = lines()
  assert.ok(line, 'one line written')
  assert.deepEqual(fieldsOfLine(line), scrubbedFields())
  assert.deepEqual(leaksIn(text()), [])
})

test("a line names its event as the Worker's do, in `event`, and as pino's `msg`", () => {
  const { log, lines } = capture('info')
  log.child({ source: 'kafka' }).error('source.crashed', { restartedBy: 'kafkajs' })
  assert.deepEqual(lines(), [
    {
      level: 'error',
      time: lines()[0]?.time,
      service: 'notify-edge-bridge',
      source: 'kafka',
      event: 'source.crashed',
      restartedBy: 'kafkajs',
      msg: 'source.crashed',
    },
  ])
})

test("a child logger's fields are scrubbed like a line's", () => {
  const { log, text, lines } = capture('info')
  log
    .child({ recipient: 'anna.client@example.com', origin: 'kafka:topic/0@1 anna.client@example.com' })
    .info('test.child')
  assert.deepEqual(leaksIn(text()), [])
  assert.equal(lines()[0]?.recipient, '[redacted]')
  assert.equal(lines()[0]?.origin, 'kafka:topic/0@1 a***@example.com')
})

test('lines below the level are not written', () => {
  const { log, lines } = capture('warn')
  log.info('test.quiet')
  log.debug('test.quiet')
  log.warn('test.loud')
  assert.deepEqual(
    lines().map((line) => line.event),
    ['test.loud'],
  )
})
