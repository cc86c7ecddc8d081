import fc from 'fast-check'
import PostalMime from 'postal-mime'
import { describe, expect, it } from 'vitest'
import {
  checkMessageLimits,
  MAX_CUSTOM_HEADER_BYTES,
  MAX_HEADER_VALUE_BYTES,
  MAX_LINE_CHARACTERS,
  MAX_MESSAGE_BYTES,
  MAX_SUBJECT_CHARACTERS,
} from '../src/mail/limits.ts'
import { buildMime, type Mail, messageIdOf, notificationIdOfMessageId } from '../src/mail/mime.ts'
import { maskUnsubscribeTokensInMime } from '../src/preferences/mask.ts'
import { signUnsubscribe } from '../src/preferences/token.ts'

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

/** `bytes` characters of ASCII with a space every 71st, so that the value can be folded at will. */
function foldableValue(bytes: number): string {
  const words = Math.floor((bytes - 1) / 71)
  return `${'a'.repeat(70)} `.repeat(words) + 'a'.repeat(bytes - 71 * words)
}

/** A header field whose unfolded value is `bytes` long, folded at every space so no line is long. */
function foldedField(name: string, bytes: number): string {
  return `${name}: ${foldableValue(bytes).replaceAll(' ', `${CRLF} `)}`
}

function withHeaders(raw: string, ...fields: string[]): string {
  return raw.replace(CRLF + CRLF, `${CRLF}${fields.join(CRLF)}${CRLF}${CRLF}`)
}

/** The raw message with body lines appended until it is exactly `bytes` long. */
function paddedTo(raw: string, bytes: number): string {
  const missing = bytes - new TextEncoder().encode(raw).length - CRLF.length
  const lines = Math.floor(missing / 78)
  return `${raw}${CRLF}${`${'A'.repeat(76)}${CRLF}`.repeat(lines)}${'A'.repeat(missing - 78 * lines)}`
}

describe('checkMessageLimits (the Email Service limits, checked before sending)', () => {
  const mail = mailWith({
    to: { address: 'anna.client@example.com', name: 'Анна Клиент' },
    unsubscribeUrl: 'https://notify-edge.example.workers.dev/unsubscribe?token=secret-token',
  })
  const raw = buildMime(mail)
  /** checkMessageLimits, and what its message must never hold: it goes to logs. */
  const check = (subject: Mail, message: string) => {
    const result = checkMessageLimits(subject, message)
    for (const personal of ['@', 'Анна', 'Клиент', 'Notify Edge', 'Ё', '👍', 'secret-token', 'aaaa']) {
      expect(result?.message ?? '').not.toContain(personal)
    }
    return result
  }

  it('a message within every limit passes', () => {
    expect(check(mail, raw)).toBeUndefined()
  })

  it('subject: 998 characters pass, 999 do not (counted in characters, not bytes or UTF-16 units)', () => {
    const at = mailWith({ subject: 'Ё'.repeat(MAX_SUBJECT_CHARACTERS) })
    expect(check(at, buildMime(at))).toBeUndefined()
    const emoji = mailWith({ subject: '👍'.repeat(MAX_SUBJECT_CHARACTERS) })
    expect(check(emoji, buildMime(emoji))).toBeUndefined()
    const over = mailWith({ subject: 'Ё'.repeat(MAX_SUBJECT_CHARACTERS + 1) })
    expect(check(over, buildMime(over))).toEqual({
      code: 'NTF_MESSAGE_INVALID',
      message: "the subject is 999 characters, over the Email Service's limit of 998",
    })
  })

  it('message size: 5 MiB passes, one byte more does not', () => {
    expect(check(mail, paddedTo(raw, MAX_MESSAGE_BYTES))).toBeUndefined()
    expect(check(mail, paddedTo(raw, MAX_MESSAGE_BYTES + 1))).toEqual({
      code: 'NTF_MESSAGE_INVALID',
      message: "the message is 5242881 bytes, over the Email Service's limit of 5242880 (5 MiB)",
    })
  })

  it('a custom header value: 2,048 bytes pass, 2,049 do not', () => {
    expect(check(mail, withHeaders(raw, foldedField('X-Long', MAX_HEADER_VALUE_BYTES)))).toBeUndefined()
    expect(check(mail, withHeaders(raw, foldedField('X-Long', MAX_HEADER_VALUE_BYTES + 1)))).toEqual({
      code: 'NTF_MESSAGE_INVALID',
      message: "the X-Long header's value is 2049 bytes, over the Email Service's limit of 2048",
    })
  })

  it('custom headers together: 16 KB pass, one byte more does not; Subject, From, To and Content-Type do not count', () => {
    const plain = mailWith({ subject: 'Ё'.repeat(MAX_SUBJECT_CHARACTERS) })
    const base = buildMime(plain)
    // The one custom header buildMime writes without an unsubscribe link, as name + ': ' + value + CRLF.
    const own = 'X-Notify-Edge-Notification'.length + 2 + plain.notificationId.length + 2
    const filled = (total: number) => {
      const count = 8
      return Array.from({ length: count }, (_, index) => {
        const payload = Math.floor(total / count) + (index < total % count ? 1 : 0)
        return foldedField(`X-Fill-${index}`, payload - `X-Fill-${index}`.length - 4)
      })
    }
    expect(check(plain, withHeaders(base, ...filled(MAX_CUSTOM_HEADER_BYTES - own)))).toBeUndefined()
    expect(check(plain, withHeaders(base, ...filled(MAX_CUSTOM_HEADER_BYTES - own + 1)))).toEqual({
      code: 'NTF_MESSAGE_INVALID',
      message: "the custom headers are 16001 bytes together, over the Email Service's limit of 16000 (16 KB)",
    })
  })

  it('a line: 998 characters pass, 999 do not (RFC 5322)', () => {
    const field = (length: number) => `X-Long: ${'a'.repeat(length - 'X-Long: '.length)}`
    expect(check(mail, withHeaders(raw, field(MAX_LINE_CHARACTERS)))).toBeUndefined()
    const result = check(mail, withHeaders(raw, field(MAX_LINE_CHARACTERS + 1)))
    expect(result?.code).toBe('NTF_MESSAGE_INVALID')
    expect(result?.message).toMatch(/^line \d+ is 999 characters, over RFC 5322's limit of 998$/)
  })
})

describe('a raw message with its unsubscribe tokens masked (what a viewer downloads)', () => {
  it('has no token in any header or part, however encoded, and is otherwise the message that was sent', async () => {
    const token = await signUnsubscribe(
      { userId: crypto.randomUUID(), kind: 'ResponseCreated', channel: 'email' },
      'test-unsubscribe-signing-key-0123456789',
    )
    const link = `https://notify-edge.example.workers.dev/u/${token}`
    const mail = {
      notificationId: 'ntf_privacy_mask_0123456789',
      from: { address: 'notify@notify-edge.example', name: 'Notify Edge' },
      to: { address: 'someone@example.com', name: null },
      // A template may put the link anywhere: here the subject too, where it travels as encoded-words.
      subject: `Новый отклик — отписаться: ${link}`,
      text: `Здравствуйте!\nОтписаться: ${link}`,
      html: `<p>Здравствуйте!</p><p><a href="${link}">Отписаться</a> ${encodeURIComponent(link)}</p>`,
      unsubscribeUrl: link,
    }
    const raw = buildMime(mail)
    const masked = maskUnsubscribeTokensInMime(raw)
    const parsed = await PostalMime.parse(masked)
    const everything = [masked, parsed.subject, parsed.text, parsed.html, ...parsed.headers.map((h) => h.value)].join(
      '\n',
    )
    expect(everything).not.toContain(token)
    expect(everything).not.toMatch(/v1\.[A-Za-z0-9_-]{16,}\.[A-Za-z0-9_-]{43}/)
    const masker = 'https://notify-edge.example.workers.dev/u/[token]'
    expect(parsed.subject).toBe(`Новый отклик — отписаться: ${masker}`)
    expect(parsed.text).toBe(`Здравствуйте!\nОтписаться: ${masker}`)
    expect(parsed.html).toContain(`<a href="${masker}">Отписаться</a>`)
    expect(parsed.headers.find((h) => h.key === 'list-unsubscribe')?.value).toBe(`<${masker}>`)
    // Everything else is as sent: the same header lines but the masked ones, the same parts.
    const unmasked = await PostalMime.parse(raw)
    expect(parsed.messageId).toBe(unmasked.messageId)
    expect(parsed.to).toEqual(unmasked.to)
    const otherLines = (text: string) =>
      text
        .slice(0, text.indexOf('\r\n\r\n'))
        .split('\r\n')
        .filter((line) => !/^(Subject|List-Unsubscribe):|^[ \t]/.test(line))
    expect(otherLines(masked)).toEqual(otherLines(raw))
    // A message without a token is left byte for byte.
    const transactional = buildMime({
      ...mail,
      subject: 'Решение',
      text: 'Текст',
      html: '<p>Текст</p>',
      unsubscribeUrl: null,
    })
    expect(maskUnsubscribeTokensInMime(transactional)).toBe(transactional)
  })
})

describe('the Message-ID of a notification, and back', () => {
  it('names the notification it was made for, with or without its angle brackets; anything else names none', () => {
    fc.assert(
      fc.property(fc.stringMatching(/^ntf_b\d{1,4}_[0-9a-f]{32}$/), fc.domain(), (id, domain) => {
        const messageId = messageIdOf({ notificationId: id, from: { address: `notifications@${domain}`, name: 'x' } })
        expect(notificationIdOfMessageId(messageId)).toBe(id)
        expect(notificationIdOfMessageId(messageId.slice(1, -1))).toBe(id)
      }),
    )
    for (const other of ['', 'no-at-sign', '<a@b@c>', 'two words@example.com', '@example.com']) {
      expect(notificationIdOfMessageId(other)).toBeNull()
    }
  })
})
