import { z } from '@hono/zod-openapi'
import type { Context } from 'hono'
import { configOf } from '../../config.ts'
import { shardDbOfUserToWrite } from '../../d1/shards.ts'
import { ApiError, type FieldIssue } from '../../errors.ts'
import type { DeliveryMode } from '../../events/define.ts'
import { deliveryOf, kindOf } from '../../events/registry.ts'
import { CHOICES, choiceInEffect, modeRefusal } from '../../preferences/choice.ts'
import {
  choicePage,
  confirmPage,
  donePage,
  invalidPage,
  type PageLocale,
  pageLocaleOf,
  refusedChoicePage,
  savedPage,
} from '../../preferences/page.ts'
import { optOut, preferencesOf, upsertPreference } from '../../preferences/preference-store.ts'
import { type UnsubscribeScope, verifyUnsubscribe } from '../../preferences/token.ts'
import { type AppEnv, createRouter, ErrorSchema } from '../openapi.ts'
import { publicRoute } from '../roles.ts'

const TokenParam = z.object({
  token: z.string().openapi({ param: { name: 'token', in: 'path' }, description: 'the token of the link' }),
})

const htmlPage = (description: string) => ({ description, content: { 'text/html': { schema: z.string() } } })

const invalid = {
  description:
    'Not a link this Worker signed (forged, cut short, another key), or a `mode` its kind does not offer: nothing changed',
  content: { 'text/html': { schema: z.string() }, 'application/json': { schema: ErrorSchema } },
}

const show = publicRoute({
  method: 'get',
  path: '/{token}',
  summary:
    'The page of a link: unsubscribe, or for a kind with a digest the choice of instant, digest or off; changes nothing',
  request: { params: TokenParam },
  responses: { 200: htmlPage('The confirmation page, or the choice page'), 400: invalid },
})

/**
 * The two forms a POST may carry, documented but not validated by the
 * router: its validator would refuse (415) a media type it does not list,
 * and a one-click unsubscribe is honoured whatever its body.
 */
const ChoiceForm = {
  type: 'object' as const,
  properties: {
    'List-Unsubscribe': { type: 'string' as const, enum: ['One-Click'], description: 'RFC 8058: opt out' },
    mode: {
      type: 'string' as const,
      enum: [...CHOICES],
      description: 'the choice page’s answer; `digest` only for a kind with a digest on the link’s channel',
    },
  },
}

// No CSRF token on the page's form: the link's signed token is the only authority a POST has (no
// cookie, no session), so a site that does not know it cannot post for the recipient, and one
// that knows it needs no browser to.
const unsubscribe = publicRoute({
  method: 'post',
  path: '/{token}',
  summary: 'One-click unsubscribe (RFC 8058), or the choice of the link’s page, for the link’s user, kind and channel',
  description:
    'No other authentication: the signed token is the proof. Mail providers POST `List-Unsubscribe=One-Click` here: ' +
    'that, any other body or none opts out, idempotently. A form with `mode` (and no `List-Unsubscribe`) is the ' +
    'choice page’s: `off` opts out the same way, `instant` or `digest` turns the kind on in that mode.',
  request: {
    params: TokenParam,
    body: {
      required: false,
      content: {
        'application/x-www-form-urlencoded': { schema: ChoiceForm },
        'multipart/form-data': { schema: ChoiceForm },
      },
    },
  },
  responses: { 200: htmlPage('Unsubscribed (now or before), or the choice saved'), 400: invalid },
})

type Resolved = { scope: UnsubscribeScope; label: string; locale: PageLocale }

/** The link's scope, when it is valid and its kind is (still) one a recipient may turn off. */
async function resolve(c: Context<AppEnv>, token: string): Promise<Resolved | undefined> {
  const config = configOf(c.env)
  const locale = pageLocaleOf(c.req.header('accept-language'), config.DEFAULT_LOCALE)
  const keys = [config.UNSUBSCRIBE_SIGNING_KEY, config.UNSUBSCRIBE_SIGNING_KEY_PREVIOUS].filter(
    (key): key is string => key !== undefined,
  )
  const scope = await verifyUnsubscribe(token, keys)
  const kind = scope ? kindOf(scope.kind) : undefined
  if (!scope || kind?.category !== 'optional') return undefined
  return { scope, locale, label: kind.labels?.[locale] ?? kind.summary }
}

/** A browser gets `page` (which says nothing changed); anything else the coded error naming the field. */
function refuse(c: Context<AppEnv>, issue: FieldIssue, page: (locale: PageLocale) => ReturnType<typeof invalidPage>) {
  if ((c.req.header('accept') ?? '').includes('text/html')) {
    const locale = pageLocaleOf(c.req.header('accept-language'), configOf(c.env).DEFAULT_LOCALE)
    return c.html(page(locale), 400)
  }
  throw new ApiError('INVALID_REQUEST', issue.message, [issue])
}

const NOT_SIGNED = { field: 'token', message: 'not an unsubscribe link this Worker signed; nothing was changed' }

/** The choice page's form is a few bytes: a larger body is not buffered, and is no choice. */
const CHOICE_FORM_MAX_BYTES = 4096

/** The body, when it is at most `max` bytes; undefined (and the rest left unread) when it is more. */
async function smallBody(request: Request, max: number): Promise<Blob | undefined> {
  const chunks: Uint8Array[] = []
  let size = 0
  const reader = request.body?.getReader()
  while (reader) {
    const { done, value } = await reader.read()
    if (done) break
    size += value.byteLength
    if (size > max) {
      await reader.cancel()
      return undefined
    }
    chunks.push(value)
  }
  return new Blob(chunks)
}

/**
 * The choice a POST carries: undefined for a one-click unsubscribe (RFC 8058's
 * body, any other body, none, or one that is too large or not a form: each
 * opts out as it always did), else the form's `mode` as sent, to be checked.
 */
async function postedChoice(c: Context<AppEnv>): Promise<string | undefined> {
  const contentType = c.req.header('content-type')
  if (!contentType) return undefined
  try {
    const body = await smallBody(c.req.raw, CHOICE_FORM_MAX_BYTES)
    if (!body) return undefined
    const form = await new Response(body, { headers: { 'content-type': contentType } }).formData()
    const mode = form.get('mode')
    if (form.has('List-Unsubscribe') || mode === null) return undefined
    return typeof mode === 'string' ? mode : ''
  } catch {
    return undefined
  }
}

const isMode = (value: string): value is DeliveryMode => value === 'instant' || value === 'digest'

/** `/u`: one-click unsubscribe links, reachable by recipients without any token but the link's own. */
export const unsubscribeLinks = createRouter()

/**
 * A link's page loads nothing and runs nothing: its one style is the body's
 * own attribute, its one form posts back to the link itself, and no other
 * site may frame it (a framed one-click button is a click another page could
 * steal).
 */
const LINK_PAGE_POLICY =
  "default-src 'none'; style-src 'unsafe-inline'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'"

// A personal page: never cached by a proxy, never indexed.
unsubscribeLinks.use(async (c, next) => {
  await next()
  c.header('content-security-policy', LINK_PAGE_POLICY)
  c.header('cache-control', 'no-store')
})

unsubscribeLinks
  .openapi(show, async (c) => {
    const resolved = await resolve(c, c.req.valid('param').token)
    if (!resolved) return refuse(c, NOT_SIGNED, invalidPage)
    const { scope, locale, label } = resolved
    const schedule = deliveryOf(scope.kind, scope.channel).digest
    // Without a digest there is nothing to choose but on or off: the one-click question stays.
    if (!schedule) return c.html(confirmPage(locale, label), 200)
    const stored = (await preferencesOf(await shardDbOfUserToWrite(c.env, scope.userId), scope.userId)).find(
      (row) => row.kind === scope.kind && row.channel === scope.channel,
    )
    return c.html(choicePage(locale, label, schedule, choiceInEffect(scope.kind, scope.channel, stored)), 200)
  })
  .openapi(unsubscribe, async (c) => {
    const resolved = await resolve(c, c.req.valid('param').token)
    if (!resolved) return refuse(c, NOT_SIGNED, invalidPage)
    const { scope, locale, label } = resolved
    const now = new Date().toISOString()
    const choice = await postedChoice(c)
    if (choice === undefined || choice === 'off') {
      await optOut(await shardDbOfUserToWrite(c.env, scope.userId), scope, now).run()
      return c.html(donePage(locale, label), 200)
    }
    const refuseChoice = (why: string) =>
      refuse(c, { field: 'mode', message: `${why}; nothing was changed` }, (at) => refusedChoicePage(at, label))
    if (!isMode(choice)) return refuseChoice(`one of ${CHOICES.join(', ')}`)
    const refused = modeRefusal(scope.kind, scope.channel, choice)
    if (refused) return refuseChoice(refused)
    // Choosing how it comes is choosing to get it: the kind is turned back on if it was off.
    const chosen = { kind: scope.kind, channel: scope.channel, enabled: true, mode: choice }
    await upsertPreference(
      await shardDbOfUserToWrite(c.env, scope.userId),
      scope.userId,
      chosen,
      'unsubscribe',
      now,
    ).run()
    return c.html(savedPage(locale, label, choice, deliveryOf(scope.kind, scope.channel).digest), 200)
  })
