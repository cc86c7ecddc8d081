/**
 * Header field bodies by RFC 2047 and RFC 5322: text that is not plain ASCII
 * becomes UTF-8 encoded-words, and a field is folded (CRLF + space) before
 * whatever would take a line past 78 characters.
 *
 * Written here because mimetext 3 cannot: it writes a whole Subject or display
 * name as a single `=?utf-8?B?…?=`, however long (a 400-character Cyrillic
 * subject makes one line of more than 1,000 characters, past RFC 5322's hard
 * limit of 998), and it has no option for folding; only the line ending can be
 * chosen (upstream issue muratgozel/MIMEText#53, "Encoded Subject too long", is
 * open). Its header fields do take a `dump` function, which is how mime.ts puts
 * these bodies in.
 */

/** RFC 5322 §2.1.1: a line SHOULD be at most 78 characters, CRLF excluded (and MUST be at most 998). */
const LINE_LENGTH = 78
/** RFC 2047 §2: an encoded-word is at most 75 characters. */
const WORD_LENGTH = 75
/** B rather than Q: a Cyrillic letter costs 6 characters in Q (`=D0=9F`) and under 3 in B. */
const WORD_START = '=?UTF-8?B?'
const WORD_END = '?='

/** Printable ASCII: an unstructured field (Subject) may carry such a word as it is (RFC 5322 §3.2.5). */
const PLAIN_TEXT = /^[\x21-\x7e]+$/
/** RFC 5322 §3.2.3 atext: a display name may carry such a word unquoted. */
const ATOM = /^[A-Za-z0-9!#$%&'*+/=?^_`{|}~-]+$/
/** What a quoted-string may hold after `\` and `"` are escaped: printable ASCII and spaces. */
const QUOTABLE = /^[\x20-\x7e]*$/

const utf8 = new TextEncoder()
const graphemes = new Intl.Segmenter(undefined, { granularity: 'grapheme' })

/** The physical lines of one header field, starting with `Name:`. */
class Lines {
  private readonly done: string[] = []
  private line: string
  private readonly nameLength: number

  constructor(fieldName: string) {
    this.line = `${fieldName}:`
    this.nameLength = this.line.length
  }

  /**
   * True while the first line holds only `Name:`. mimetext writes `Name: ` before
   * the body itself, so a fold there would leave a line ending in a space; the
   * first word is made to fit instead.
   */
  get atStart(): boolean {
    return this.done.length === 0 && this.line.length === this.nameLength
  }

  /** Characters left on the current line for one more word after its space. */
  get room(): number {
    return LINE_LENGTH - this.line.length - 1
  }

  /** Whether a fold would give the next word a fresh line. */
  get canFold(): boolean {
    return !this.atStart && this.line !== ''
  }

  /** Adds a word after a space, folding first when it would not fit on this line. */
  put(word: string): void {
    if (word.length > this.room && this.canFold) this.fold()
    this.line += ` ${word}`
  }

  /** RFC 5322 §2.2.3: CRLF before the space that separates two words. */
  fold(): void {
    if (!this.canFold) return
    this.done.push(this.line)
    this.line = ''
  }

  /** The field body, without the `Name: ` that mimetext writes before it. */
  body(): string {
    return [...this.done, this.line].join('\r\n').slice(this.nameLength + 1)
  }
}

/** The UTF-8 bytes that an encoded-word of at most `length` characters can carry (base64: 4 characters for 3 bytes). */
function bytesIn(length: number): number {
  return Math.floor(Math.max(0, length - WORD_START.length - WORD_END.length) / 4) * 3
}

function encodedWord(text: string): string {
  let binary = ''
  for (const byte of utf8.encode(text)) binary += String.fromCharCode(byte)
  return `${WORD_START}${btoa(binary)}${WORD_END}`
}

/**
 * Writes `text` as encoded-words, each as long as the line allows. A word ends
 * between graphemes, so an emoji sequence or a letter with its accent is never
 * shown in halves; a grapheme too long for any word (a letter under dozens of
 * combining marks) is split between code points. No word ever ends inside a
 * UTF-8 character, as RFC 2047 §5 requires.
 */
function putEncoded(lines: Lines, text: string): void {
  const pending = [...graphemes.segment(text)].map((segment) => segment.segment).reverse()
  const full = bytesIn(WORD_LENGTH)
  let left = utf8.encode(text).length
  let word = ''
  let size = 0
  while (pending.length > 0) {
    const unit = pending.pop() as string
    const bytes = utf8.encode(unit).length
    const here = bytesIn(Math.min(WORD_LENGTH, lines.room))
    // Rather a fold than a stub of a word at the end of a line, or a short text cut in two across lines.
    if (word === '' && lines.canFold && here < left && (left <= full || here < full / 3)) {
      lines.fold()
      pending.push(unit)
    } else if (size + bytes <= here) {
      word += unit
      size += bytes
      left -= bytes
    } else if (word !== '') {
      lines.put(encodedWord(word))
      word = ''
      size = 0
      pending.push(unit)
    } else if (lines.canFold && bytes <= full) {
      lines.fold()
      pending.push(unit)
    } else if ([...unit].length > 1) {
      pending.push(...[...unit].reverse())
    } else {
      // One code point and no room left: only a field name of some 60 characters gets here.
      lines.put(encodedWord(unit))
      left -= bytes
    }
  }
  if (word !== '') lines.put(encodedWord(word))
}

/**
 * Writes `text` word by word (words are split at single spaces between two
 * non-spaces): a word that `plain` accepts and that fits on a line stays as it
 * is; each run of other words, with the spaces inside it, becomes
 * encoded-words. A decoder drops the white space between two encoded-words and
 * keeps the one between an encoded-word and a plain word (RFC 2047 §6.2), so
 * the text reads back exactly, double spaces and line breaks included.
 */
function putText(lines: Lines, text: string, plain: RegExp): void {
  let run: string[] = []
  for (const token of text.split(/(?<=[^ ]) (?=[^ ])/)) {
    const limit = lines.atStart && run.length === 0 ? lines.room : LINE_LENGTH - 1
    // A plain word that starts with `=?` would be read as an encoded-word.
    if (plain.test(token) && !token.includes('=?') && token.length <= limit) {
      if (run.length > 0) putEncoded(lines, run.join(' '))
      run = []
      lines.put(token)
    } else {
      run.push(token)
    }
  }
  if (run.length > 0) putEncoded(lines, run.join(' '))
}

/**
 * A display name (RFC 5322 §3.4 phrase): atoms when every word is one, a
 * quoted-string when ASCII with specials (`"`, `,`, `<`, `@`, `;`, `:`, `\`…)
 * fits on the line, encoded-words otherwise. Specials inside an encoded-word
 * need no quoting: base64 hides them.
 */
function putPhrase(lines: Lines, name: string): void {
  const words = name.split(' ')
  if (QUOTABLE.test(name) && !name.includes('=?') && !words.every((word) => ATOM.test(word))) {
    const quoted = `"${name.replace(/[\\"]/g, '\\$&')}"`
    if (quoted.length <= lines.room) {
      lines.put(quoted)
      return
    }
  }
  putText(lines, name, ATOM)
}

/**
 * The body of an unstructured field such as Subject, to follow `Name: `:
 * printable ASCII words as they are, anything else as UTF-8 encoded-words,
 * folded so that no line passes 78 characters.
 */
export function unstructuredBody(fieldName: string, text: string): string {
  const lines = new Lines(fieldName)
  putText(lines, text, PLAIN_TEXT)
  return lines.body()
}

/** A mailbox as mime.ts has it: an address and an optional display name. */
export type MailboxInput = { address: string; name?: string | null }

/**
 * The body of an address field (From, To), to follow `Name: `: each mailbox
 * as `display name <address>`, or `<address>` without a name, folded between
 * words. Addresses are written as they are, so one with white space, angle
 * brackets or a control character (it could start a header of its own) is
 * refused.
 */
export function mailboxesBody(fieldName: string, mailboxes: readonly MailboxInput[]): string {
  const lines = new Lines(fieldName)
  mailboxes.forEach(({ address, name }, index) => {
    if (address === '' || /[\s<>\p{Cc}]/u.test(address)) {
      throw new Error(`${fieldName}: an address must have no white space, angle bracket or control character`)
    }
    if (name) putPhrase(lines, name)
    lines.put(`<${address}>${index < mailboxes.length - 1 ? ',' : ''}`)
  })
  return lines.body()
}
