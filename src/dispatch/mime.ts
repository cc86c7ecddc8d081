import { createMimeMessage } from 'mimetext/browser'

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

/** UTF-8 text as base64 in lines of 76 characters (RFC 2045). */
function base64Lines(text: string): string {
  const bytes = new TextEncoder().encode(text)
  let binary = ''
  for (let index = 0; index < bytes.length; index += 0x8000) {
    binary += String.fromCharCode(...bytes.subarray(index, index + 0x8000))
  }
  return (btoa(binary).match(/.{1,76}/g) ?? []).join('\r\n')
}

/**
 * Builds the raw MIME message with mimetext: UTF-8 subject and display names,
 * a text and an HTML part (base64, so any script survives any relay), a
 * Message-ID derived from the notification id, and the one-click unsubscribe
 * headers when the kind is optional.
 */
export function buildMime(mail: Mail): string {
  const message = createMimeMessage()
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
