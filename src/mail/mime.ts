import { createMimeMessage, type HeaderField, Mailbox, type MIMEMessage } from 'mimetext/browser'
import { mailboxesBody, unstructuredBody } from './header-fields.ts'

/** What a message says and to whom. */
export type Mail = {
  notificationId: string
  from: { address: string; name: string }
  to: { address: string; name: string | null }
  subject: string
  text: string
  html: string
  /** One-click unsubscribe link of an optional kind: `List-Unsubscribe` + `List-Unsubscribe-Post` (RFC 2369, RFC 8058). */
  unsubscribeUrl: string | null
}

/** The list headers of a mail with an unsubscribe link; none for a transactional one. */
export function listHeadersOf(mail: Pick<Mail, 'unsubscribeUrl'>): Record<string, string> {
  if (!mail.unsubscribeUrl) return {}
  return { 'List-Unsubscribe': `<${mail.unsubscribeUrl}>`, 'List-Unsubscribe-Post': 'List-Unsubscribe=One-Click' }
}

/** `<{notificationId}@{sender's domain}>`: the same notification always has the same Message-ID. */
export function messageIdOf(mail: Pick<Mail, 'notificationId' | 'from'>): string {
  return `<${mail.notificationId}@${mail.from.address.slice(mail.from.address.indexOf('@') + 1)}>`
}

/**
 * The notification a Message-ID of ours names (`messageIdOf`'s inverse), with
 * or without its angle brackets; null for one that is not of that form.
 */
export function notificationIdOfMessageId(messageId: string): string | null {
  return /^<?([^@<>\s]+)@[^@<>\s]+>?$/.exec(messageId.trim())?.[1] ?? null
}

const encoder = new TextEncoder()

/** UTF-8 text as base64 in lines of 76 characters (RFC 2045). */
function base64Lines(text: string): string {
  const bytes = encoder.encode(text)
  let binary = ''
  for (let index = 0; index < bytes.length; index += 0x8000) {
    binary += String.fromCharCode(...bytes.subarray(index, index + 0x8000))
  }
  const base64 = btoa(binary)
  // Slices, not a regular expression: this runs over every part of every email.
  const lines: string[] = []
  for (let index = 0; index < base64.length; index += 76) lines.push(base64.slice(index, index + 76))
  return lines.join('\r\n')
}

/**
 * Has mimetext write one of its own header fields (Subject, From, To) with
 * `dump`. mimetext writes `Name: ` and then what `dump` returns; its own dumps
 * put the whole value in one encoded-word, never folded (see header-fields.ts).
 */
function dumpWith(message: MIMEMessage, name: string, dump: (value: HeaderField['value']) => string): void {
  const field = message.headers.fields.find((candidate) => candidate.name === name)
  // mimetext is pinned; a version whose fields are arranged otherwise fails here, not in a mail client.
  if (!field) throw new Error(`mimetext has no ${name} header field`)
  field.dump = dump
}

function mailboxesOf(value: HeaderField['value']): { address: string; name: string }[] {
  const mailboxes = Array.isArray(value) ? value : [value]
  return mailboxes.flatMap((mailbox) =>
    mailbox instanceof Mailbox ? [{ address: mailbox.addr, name: mailbox.name }] : [],
  )
}

/**
 * Builds the raw MIME message with mimetext: the Subject and the display names
 * as RFC 2047 encoded-words where they are not plain ASCII, folded so that no
 * header line passes 78 characters where a space or an encoded-word allows it
 * (header-fields.ts), a text and an HTML part (base64, so any script survives
 * any relay), a Message-ID derived from the notification id, and the one-click
 * unsubscribe headers when the kind is optional.
 */
export function buildMime(mail: Mail): string {
  const message = createMimeMessage()
  dumpWith(message, 'Subject', (value) => unstructuredBody('Subject', typeof value === 'string' ? value : ''))
  dumpWith(message, 'From', (value) => mailboxesBody('From', mailboxesOf(value)))
  dumpWith(message, 'To', (value) => mailboxesBody('To', mailboxesOf(value)))
  message.setSender({ addr: mail.from.address, name: mail.from.name })
  message.setRecipient(mail.to.name ? { addr: mail.to.address, name: mail.to.name } : { addr: mail.to.address })
  message.setSubject(mail.subject)
  message.setHeader('Message-ID', messageIdOf(mail))
  message.setHeader('X-Notify-Edge-Notification', mail.notificationId)
  for (const [name, value] of Object.entries(listHeadersOf(mail))) message.setHeader(name, value)
  message.addMessage({ contentType: 'text/plain', data: base64Lines(mail.text), encoding: 'base64' })
  message.addMessage({ contentType: 'text/html', data: base64Lines(mail.html), encoding: 'base64' })
  return message.asRaw()
}
