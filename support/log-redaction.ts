/**
 * One set of log fields for the tests of both loggers (the Worker's in
 * test/log-vocabulary.test.ts, the bridge's in bridge/test/log.test.ts), and
 * what each must write of it: the same input and the same expected line
 * fields, so the two cannot redact different lists.
 */
import { LOG_REDACTED_KEYS, LOG_REDACTED_VALUE, LOG_TOO_DEEP_VALUE, type LogFields } from '@notify-edge/contracts'

/** A display name: the privacy scan (support/privacy.ts) knows it, so a line that keeps it fails that scan too. */
const NAME = 'Анна Клиент'

/** The event name both tests log. */
export const REDACTION_EVENT = 'test.redaction'

/** `displayName`, `displayname`, `DISPLAYNAME`, `DisplayName`: the keys are matched in any case. */
function spellings(key: string): string[] {
  return [key, key.toLowerCase(), key.toUpperCase(), `${key.charAt(0).toUpperCase()}${key.slice(1)}`]
}

function underEveryKey(value: unknown): LogFields {
  return Object.fromEntries(LOG_REDACTED_KEYS.flatMap((key) => spellings(key).map((spelling) => [spelling, value])))
}

/** A personal value under every spelling of every redacted key, at the top, in a list, three levels down and past the levels the scrub walks; an address in free text and in an error; and fields that must come through unchanged. */
export function personalFields(): LogFields {
  return {
    ...underEveryKey(NAME),
    nested: { list: [underEveryKey(NAME)], deeper: { still: underEveryKey(NAME) } },
    // Past the levels the scrub walks: written as too deep, its names with it.
    deep: { a: { b: { c: { d: { e: { displayName: NAME, note: 'sent to anna.client@example.com' } } } } } },
    note: 'sent to anna.client@example.com',
    error: new Error('refused anna.client@example.com'),
    status: 503,
    waitMs: 1200,
    source: 'kafka',
    messageIds: ['7f1a0c62', '8e2b1d73'],
  }
}

/** The fields of the line a logger writes for `personalFields()`, each as it must appear. */
export function scrubbedFields(): LogFields {
  return {
    ...underEveryKey(LOG_REDACTED_VALUE),
    nested: { list: [underEveryKey(LOG_REDACTED_VALUE)], deeper: { still: underEveryKey(LOG_REDACTED_VALUE) } },
    deep: { a: { b: { c: { d: { e: LOG_TOO_DEEP_VALUE } } } } },
    note: 'sent to a***@example.com',
    error: { name: 'Error', message: 'refused a***@example.com' },
    status: 503,
    waitMs: 1200,
    source: 'kafka',
    messageIds: ['7f1a0c62', '8e2b1d73'],
  }
}

/** The fields of a written line that `scrubbedFields()` names, to compare with it. */
export function fieldsOfLine(line: Record<string, unknown>): LogFields {
  return Object.fromEntries(Object.keys(scrubbedFields()).map((key) => [key, line[key]]))
}
