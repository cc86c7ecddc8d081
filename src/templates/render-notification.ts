import type { Config } from '../config.ts'
import { PipelineError } from '../errors.ts'
import type { Urgency } from '../events/define.ts'
import { kindOf, quietHoursHold } from '../events/registry.ts'
import type { NotificationRow } from '../notifications/row.ts'
import { signUnsubscribe, type UnsubscribeScope, unsubscribeUrl } from '../preferences/token.ts'
import { inAppParts } from './in-app.ts'
import { quietHoursEnd } from './quiet-hours.ts'
import { localeChain, resolveTemplate } from './resolve.ts'
import { render, type TemplateSource } from './sandbox.ts'

/** The rendered columns of a notification row. */
export type RenderedParts = Pick<NotificationRow, 'locale' | 'subject' | 'textBody' | 'htmlBody' | 'templateVersion'>

/**
 * What a notification is, to render: its kind, urgency and template model,
 * and the key its templates are kept under when it is not the kind's own
 * (`ResponseCreated.digest` for a digest).
 */
export type RenderSubject = { kind: string; urgency: Urgency; model: Record<string, unknown>; template?: string }

/** Who it is for: the recipient's id, name, locale and time zone from the contact. */
export type RenderRecipient = { userId: string; name: string | null; locale: string; timeZone: string }

/** A notification's rendered content, its unsubscribe link and when to send it. */
export type Rendered = RenderedParts & { unsubscribeUrl: string | null; scheduledAt: string }

/**
 * Renders one notification for a recipient: the template of (kind, channel)
 * in the recipient's locale chain, the unsubscribe link of an optional kind,
 * and the send time (fallback grace, quiet hours in the recipient's zone).
 * Planning uses it (./plan-event.ts), and so do the release of a notification
 * whose contact arrived late (./release-waiting.ts) and a digest's close.
 */
export async function renderNotification(
  subject: RenderSubject,
  recipient: RenderRecipient,
  where: { channel: string; isFallback: boolean },
  templates: readonly TemplateSource[],
  config: Config,
  now: Date,
): Promise<Rendered | { error: PipelineError }> {
  const optional = kindOf(subject.kind)?.category === 'optional'
  const unsubscribeUrl = optional
    ? await unsubscribeLink(config, { userId: recipient.userId, kind: subject.kind, channel: where.channel })
    : null
  const rendered = renderFor(subject, where.channel, recipient, unsubscribeUrl, templates, config)
  if ('error' in rendered) return rendered
  const quiet = quietHoursHold(subject.kind, where.channel)
  const scheduledAt = scheduleFor(subject.urgency, where.isFallback, recipient.timeZone, config, now, quiet)
  return { ...rendered, unsubscribeUrl, scheduledAt: scheduledAt.toISOString() }
}

/** `{PUBLIC_URL}/u/{token}` for (user, kind, channel). */
export async function unsubscribeLink(config: Config, scope: UnsubscribeScope): Promise<string> {
  return unsubscribeUrl(config.PUBLIC_URL, await signUnsubscribe(scope, config.UNSUBSCRIBE_SIGNING_KEY))
}

/** The template of (kind, channel) in the recipient's locale chain, rendered; a missing or failing one is the event's error. */
function renderFor(
  intent: RenderSubject,
  channel: string,
  recipient: RenderRecipient,
  unsubscribeUrl: string | null,
  templates: readonly TemplateSource[],
  config: Config,
): RenderedParts | { error: PipelineError } {
  const chain = localeChain(recipient.locale, config.DEFAULT_LOCALE)
  const key = intent.template ?? intent.kind
  const template = resolveTemplate(templates, key, channel, chain)
  if (!template) {
    const message = `no active template for (${key}, ${chain.join(' → ')}, ${channel})`
    return { error: new PipelineError('NTF_TEMPLATE_NOT_RESOLVED', message) }
  }
  try {
    const model = { ...intent.model, recipientName: recipient.name, unsubscribeUrl }
    const rendered = render(template, model, template.locale, config.templateLimits)
    const parts =
      channel === 'in-app'
        ? inAppParts(rendered)
        : { subject: rendered.subject, textBody: rendered.text, htmlBody: rendered.html }
    return { locale: template.locale, ...parts, templateVersion: template.version }
  } catch (cause) {
    const which = `(${template.kind}, ${template.locale}, ${template.channel}) v${template.version}`
    const message = `template ${which} failed to render: ${(cause as Error).message}`
    return { error: new PipelineError('NTF_TEMPLATE_INVALID', message, { cause }) }
  }
}

/**
 * When to send: now; a fallback decision after its grace period; an urgency
 * held by quiet hours when they end in the recipient's zone — unless quiet
 * hours do not hold it (`quiet` false: an in-app item, by default).
 */
export function scheduleFor(
  urgency: Urgency,
  isFallback: boolean,
  timeZone: string,
  config: Pick<Config, 'FALLBACK_GRACE_SECONDS' | 'QUIET_HOURS_URGENCIES' | 'QUIET_HOURS_START' | 'QUIET_HOURS_END'>,
  now: Date,
  quiet = true,
): Date {
  const earliest = isFallback ? new Date(now.getTime() + config.FALLBACK_GRACE_SECONDS * 1000) : now
  if (!quiet || !config.QUIET_HOURS_URGENCIES.includes(urgency)) return earliest
  return quietHoursEnd(earliest, timeZone, config.QUIET_HOURS_START, config.QUIET_HOURS_END) ?? earliest
}
