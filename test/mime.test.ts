import fc from 'fast-check'
import PostalMime from 'postal-mime'
import { describe, expect, it } from 'vitest'
import { buildMime, type Mail } from '../src/dispatch/mime.ts'

const CRLF = '\r\n'
const ENCODED_WORD = /=\?([^?\s]+)\?([BbQq])\?([^?\s]*)\?=/g

function mailWith(overrides: Partial<Mail> = {}): Mail {
  return {
    notificationId: 'ntf_test_mime_0123456789',
    from: { address: 'notify@example.com', name: 'Notify Edge' },
    to: { address: 'mikhail@example.com', name: 'Михаил Дизайнер' },
    subject: 'Вас пригласили в проект',
    text: 'Текст письма\nвторая строка',
    html: '<p>Текст письма</p>',
    unsubscribeUrl: null,
    ...overrides,
  }
}

/** The top-level header block, one physical line an entry (folded fields span several). */
function headerLinesOf(raw: string): string[] {
  return raw.slice(0, raw.indexOf(CRLF + CRLF)).split(CRLF)
}

/** The physical lines of one header field: its first line and its continuation lines. */
function fieldLines(raw: string, name: string): string[] {
  const lines = headerLinesOf(raw)
  const start = lines.findIndex((line) => line.toLowerCase().startsWith(`${name.toLowerCase()}:`))
  if (start < 0) return []
  const end = lines.findIndex((line, index) => index > start && !/^[ \t]/.test(line))
  return lines.slice(start, end < 0 ? undefined : end)
}

function encodedWordsOf(text: string): string[] {
  return [...text.matchAll(ENCODED_WORD)].map((match) => match[0])
}

/** The text of one B encoded-word; `fatal` so that a UTF-8 character split across two words throws. */
function decodedB(word: string): string {
  const [, charset, encoding, payload = ''] = /^=\?([^?]+)\?([Bb])\?([^?]*)\?=$/.exec(word) ?? []
  expect(charset?.toLowerCase()).toBe('utf-8')
  expect(encoding).toBeDefined()
  return new TextDecoder('utf-8', { fatal: true, ignoreBOM: false }).decode(
    Uint8Array.from(atob(payload), (char) => char.charCodeAt(0)),
  )
}

function graphemeStarts(text: string): Set<number> {
  const segmenter = new Intl.Segmenter(undefined, { granularity: 'grapheme' })
  return new Set([...[...segmenter.segment(text)].map((segment) => segment.index), text.length])
}

/**
 * What every built message must satisfy: it parses back (with a real MIME
 * parser) to the input, no line is over RFC 5322's 998 characters, every
 * encoded-word is within RFC 2047's 75, and the fields this module encodes
 * keep to RFC 5322's recommended 78.
 */
async function expectRoundTrip(
  mail: Mail,
): Promise<{ raw: string; parsed: Awaited<ReturnType<typeof PostalMime.parse>> }> {
  const raw = buildMime(mail)
  const parsed = await PostalMime.parse(raw)
  expect(parsed.subject).toBe(mail.subject)
  expect(parsed.from).toEqual({ name: mail.from.name, address: mail.from.address })
  expect(parsed.to).toEqual([{ name: mail.to.name ?? '', address: mail.to.address }])
  expect(parsed.text?.replace(/\r?\n$/, '')).toBe(mail.text)
  expect(parsed.html?.replace(/\r?\n$/, '')).toBe(mail.html)
  expect(parsed.messageId).toBe(`<${mail.notificationId}@example.com>`)

  expect(raw).not.toMatch(/[^\r]\n|\r(?!\n)/)
  for (const line of raw.split(CRLF)) expect(line.length).toBeLessThanOrEqual(998)
  for (const word of encodedWordsOf(headerLinesOf(raw).join(CRLF))) expect(word.length).toBeLessThanOrEqual(75)
  for (const name of ['Subject', 'From', 'To']) {
    const lines = fieldLines(raw, name)
    expect(lines.length, name).toBeGreaterThan(0)
    for (const line of lines) expect(line.length, `${name}: ${line}`).toBeLessThanOrEqual(78)
  }
  return { raw, parsed }
}

const longCyrillicTitle = Array.from({ length: 20 }, () => 'Редизайн лендинга').join(' для студии ')

describe('buildMime headers (RFC 2047 encoded-words, RFC 5322 folding)', () => {
  it('a 400-character Cyrillic subject is folded into encoded-words, not one line past 998 characters', async () => {
    const subject = `Проект «${longCyrillicTitle}» закрыт`.slice(0, 400)
    expect(subject).toHaveLength(400)
    const { raw } = await expectRoundTrip(mailWith({ subject }))
    expect(fieldLines(raw, 'Subject').length).toBeGreaterThan(10)
  })

  it('a Cyrillic subject without spaces is split between characters', async () => {
    const subject = 'Ёжик'.repeat(100)
    const { raw } = await expectRoundTrip(mailWith({ subject }))
    const words = encodedWordsOf(fieldLines(raw, 'Subject').join(CRLF))
    expect(words.map(decodedB).join('')).toBe(subject)
  })

  it('emoji and combining characters: no UTF-8 character and no grapheme split across two encoded-words', async () => {
    const graphemes = ['👩‍👩‍👧‍👦', '🇷🇺', 'е\u0301', 'n\u0303', '👍🏽', 'й', '🏳️‍🌈', 'ё']
    const subject = Array.from({ length: 60 }, (_, index) => graphemes[index % graphemes.length]).join('')
    const { raw } = await expectRoundTrip(mailWith({ subject }))
    const decoded = encodedWordsOf(fieldLines(raw, 'Subject').join(CRLF)).map(decodedB)
    expect(decoded.join('')).toBe(subject)
    const starts = graphemeStarts(subject)
    let offset = 0
    for (const piece of decoded) {
      offset += piece.length
      expect(starts.has(offset), `a word ends inside a grapheme at ${offset}`).toBe(true)
    }
  })

  it('a grapheme longer than one encoded-word is split between code points, never inside one', async () => {
    const zalgo = `Z${'\u0301\u0316\u0324'.repeat(12)}`
    const subject = `${zalgo} ${zalgo}`
    const { raw } = await expectRoundTrip(mailWith({ subject }))
    expect(encodedWordsOf(fieldLines(raw, 'Subject').join(CRLF)).map(decodedB).join('')).toBe(subject)
  })

  it('display names with quotes, commas, angle brackets and other specials survive', async () => {
    const specials = 'Anna "Boss" O\'Neil, <CEO> @ Acme; Ltd: back\\slash'
    await expectRoundTrip(
      mailWith({
        from: { address: 'notify@example.com', name: specials },
        to: { address: 'anna@example.com', name: specials },
      }),
    )
    await expectRoundTrip(
      mailWith({
        from: { address: 'notify@example.com', name: 'Студия «Керамика», <отдел> "продаж"' },
        to: { address: 'anna@example.com', name: 'Анна "Начальник" О\'Нил, <CEO>' },
      }),
    )
  })

  it('long display names are folded too', async () => {
    await expectRoundTrip(
      mailWith({
        from: { address: 'notify@example.com', name: longCyrillicTitle.slice(0, 200) },
        to: { address: 'anna@example.com', name: 'Anna Maria Magdalena '.repeat(8).trim() },
      }),
    )
    const { raw } = await expectRoundTrip(
      mailWith({ to: { address: 'anna@example.com', name: 'Anna "Boss" O\'Neil, <CEO> '.repeat(4).trim() } }),
    )
    expect(fieldLines(raw, 'To').length).toBeGreaterThan(1)
  })

  it('a very long ASCII subject without spaces is encoded so that it can be folded', async () => {
    const subject = `https://example.com/${'a1b2c3d4'.repeat(120)}`
    const { raw } = await expectRoundTrip(mailWith({ subject }))
    expect(fieldLines(raw, 'Subject').length).toBeGreaterThan(10)
  })

  it('a long ASCII subject with spaces is folded at its spaces and stays readable', async () => {
    const subject = 'Your project "Redesign of the landing page" was closed, and here is what happened next. '
      .repeat(6)
      .trim()
    const { raw } = await expectRoundTrip(mailWith({ subject }))
    const lines = fieldLines(raw, 'Subject')
    expect(lines.length).toBeGreaterThan(5)
    expect(encodedWordsOf(lines.join(CRLF))).toEqual([])
  })

  it('a short plain ASCII subject and names are written as they are', async () => {
    const { raw } = await expectRoundTrip(
      mailWith({
        subject: 'Welcome to notify-edge',
        from: { address: 'notify@example.com', name: 'Notify Edge' },
        to: { address: 'anna@example.com', name: 'Anna Smith' },
      }),
    )
    expect(fieldLines(raw, 'Subject')).toEqual(['Subject: Welcome to notify-edge'])
    expect(fieldLines(raw, 'From')).toEqual(['From: Notify Edge <notify@example.com>'])
    expect(fieldLines(raw, 'To')).toEqual(['To: Anna Smith <anna@example.com>'])
  })

  it('a recipient without a name is a bare address', async () => {
    const { raw } = await expectRoundTrip(mailWith({ to: { address: 'anna@example.com', name: null } }))
    expect(fieldLines(raw, 'To')).toEqual(['To: <anna@example.com>'])
  })

  it('text that looks like an encoded-word, mixed scripts and line breaks come back as they were', async () => {
    await expectRoundTrip(mailWith({ subject: 'Literal =?utf-8?B?SGk=?= stays literal, Ёжик too' }))
    const { raw, parsed } = await expectRoundTrip(mailWith({ subject: 'Invitation to Проект X: Ёжик and friends' }))
    expect(fieldLines(raw, 'Subject')[0]).toMatch(/^Subject: Invitation to =\?/)
    expect(parsed.subject).toBe('Invitation to Проект X: Ёжик and friends')
  })

  it('a line break in a subject or name cannot start a header of its own', async () => {
    const raw = buildMime(
      mailWith({
        subject: 'Hello\r\nBcc: victim@example.com',
        to: { address: 'anna@example.com', name: 'Anna\r\nCc: victim@example.com' },
      }),
    )
    const parsed = await PostalMime.parse(raw)
    expect(parsed.bcc).toBeUndefined()
    expect(parsed.cc).toBeUndefined()
    expect(headerLinesOf(raw).filter((line) => /^(bcc|cc):/i.test(line))).toEqual([])
  })

  it('any subject and display names: read back as written, within every line and word limit', async () => {
    const piece = fc.oneof(
      fc.constantFrom(' ', '  ', 'a', 'Z', '"', ',', '<', '>', '@', ';', ':', '\\', '=?', '?=', '(', '.', '\t', '\r\n'),
      fc.constantFrom('й', 'Ё', '«', '👩‍👩‍👧‍👦', 'е\u0301', '🇷🇺', `Z${'\u0301'.repeat(30)}`),
      fc.string({ unit: 'grapheme', maxLength: 8 }),
    )
    const text = fc.string({ unit: piece, maxLength: 200 })
    await fc.assert(
      fc.asyncProperty(text, text, text, async (subject, fromName, toName) => {
        const raw = buildMime(
          mailWith({
            subject,
            from: { address: 'notify@example.com', name: fromName },
            to: { address: 'anna@example.com', name: toName || null },
          }),
        )
        for (const line of headerLinesOf(raw)) expect(line.length).toBeLessThanOrEqual(78)
        for (const word of encodedWordsOf(headerLinesOf(raw).join(CRLF))) expect(word.length).toBeLessThanOrEqual(75)
        const parsed = await PostalMime.parse(raw)
        // An empty Subject reads back as none; parsers trim display names, and only some trim a blank one.
        expect(parsed.subject ?? '').toBe(subject)
        expect(parsed.from?.name.trim()).toBe(fromName.trim())
        expect(parsed.to?.[0]?.name.trim()).toBe((toName || '').trim())
        expect(parsed.bcc).toBeUndefined()
      }),
      { numRuns: 300, seed: 20261201 },
    )
  })

  it('keeps the Message-ID, the notification header, the list headers and base64 bodies', async () => {
    const mail = mailWith({ unsubscribeUrl: 'https://notify-edge.example.workers.dev/unsubscribe?token=abc' })
    const { raw, parsed } = await expectRoundTrip(mail)
    const header = (key: string) => parsed.headers.find((entry) => entry.key === key)?.value
    expect(header('message-id')).toBe('<ntf_test_mime_0123456789@example.com>')
    expect(header('x-notify-edge-notification')).toBe('ntf_test_mime_0123456789')
    expect(header('list-unsubscribe')).toBe('<https://notify-edge.example.workers.dev/unsubscribe?token=abc>')
    expect(header('list-unsubscribe-post')).toBe('List-Unsubscribe=One-Click')
    expect(raw.match(/^Content-Transfer-Encoding: base64$/gm)).toHaveLength(2)
    expect(buildMime(mailWith())).not.toMatch(/^List-Unsubscribe/m)
  })
})
