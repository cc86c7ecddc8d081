import type { InAppTemplateParts } from '../events/define.ts'
import { BODY_MAX, LABEL_MAX, TITLE_MAX, URL_MAX } from '../inbox/item.ts'
import type { Rendered, TemplateSource } from './sandbox.ts'

/**
 * An in-app template as it is stored and edited, in the three parts every
 * template has: the title (`subject`: one line), the body (`textBody`: plain
 * text), and three lines (`htmlBody`, rendered as plain text) — the address a
 * click on the item opens, then an action's label and its address. An empty
 * line is a part the item does not have.
 */
export function inAppSource(kind: string, locale: string, version: number, parts: InAppTemplateParts): TemplateSource {
  return {
    kind,
    locale,
    channel: 'in-app',
    version,
    subject: parts.title,
    textBody: parts.body,
    htmlBody: [parts.link ?? '', parts.action?.label ?? '', parts.action?.url ?? ''].join('\n'),
  }
}

/**
 * An in-app template as an operator edits it, from the three parts it is
 * stored in (the inverse of `inAppSource`): an empty line of the third part
 * is a part the item does not have; an action is there when its label or its
 * address is.
 */
export function inAppTemplateOf(source: Pick<TemplateSource, 'subject' | 'textBody' | 'htmlBody'>): InAppTemplateParts {
  const [link = '', label = '', url = ''] = source.htmlBody.split('\n')
  return {
    title: source.subject,
    body: source.textBody,
    ...(link === '' ? {} : { link }),
    ...(label === '' && url === '' ? {} : { action: { label, url } }),
  }
}

/**
 * The fields of an in-app template, by the line of the third part each is:
 * how an error of that part is named in the words an operator edits it with.
 */
export const IN_APP_LINES = ['link', 'action.label', 'action.url'] as const

/** What an in-app item keeps in its notification's HTML body: its link and action (src/notifications/channels.ts). */
export type InAppExtras = { link: string | null; action: { label: string; url: string } | null }

/** An in-app item as a feed shows it: its title, its body, and its link and action when it has them. */
export type InAppItem = { title: string; body: string } & InAppExtras

/** An address an item may open: http(s), at most 2,048 characters; anything else is left out. */
function address(text: string): string | null {
  if (text === '' || text.length > URL_MAX) return null
  try {
    const url = new URL(text)
    return url.protocol === 'https:' || url.protocol === 'http:' ? text : null
  } catch {
    return null
  }
}

/** `text` cut to `max` characters, an ellipsis closing what was cut. */
function cut(text: string, max: number): string {
  return text.length <= max ? text : `${text.slice(0, max - 1)}…`
}

/**
 * A rendered in-app template made into an item every feed takes: a title cut
 * to 200 characters and a body to 2,000 (an ellipsis says so), an address
 * that is no http(s) one (or longer than 2,048) left out, and an action left
 * out without both its label and its address. It never fails: what a
 * producer's values make of an item must not cost the same event its email,
 * which renders on its own. A preview shows it as it is, so that an operator
 * sees what was cut or left out.
 */
export function inAppItem(rendered: Rendered): InAppItem {
  const [link = '', label = '', url = ''] = rendered.html.split('\n').map((line) => line.trim())
  const actionUrl = address(url)
  return {
    title: cut(rendered.subject, TITLE_MAX) || '…',
    body: cut(rendered.text, BODY_MAX),
    link: address(link),
    action: label !== '' && actionUrl !== null ? { label: cut(label, LABEL_MAX), url: actionUrl } : null,
  }
}

/**
 * A rendered in-app template as the notification row keeps it (`inAppItem`):
 * title as subject, body as text, link and action as JSON in the HTML body.
 */
export function inAppParts(rendered: Rendered): { subject: string; textBody: string; htmlBody: string } {
  const { title, body, link, action } = inAppItem(rendered)
  const extras: InAppExtras = { link, action }
  return { subject: title, textBody: body, htmlBody: JSON.stringify(extras) }
}
