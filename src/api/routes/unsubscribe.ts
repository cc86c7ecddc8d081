import { createRoute, z } from '@hono/zod-openapi'
import type { Context } from 'hono'
import { configOf } from '../../config.ts'
import { ApiError } from '../../errors.ts'
import { kindOf } from '../../events/registry.ts'
import { confirmPage, donePage, invalidPage, type PageLocale, pageLocaleOf } from '../../preferences/page.ts'
import { optOut } from '../../preferences/store.ts'
import { type UnsubscribeScope, verifyUnsubscribe } from '../../preferences/token.ts'
import { type AppEnv, createRouter, ErrorSchema } from '../openapi.ts'

const TokenParam = z.object({
  token: z.string().openapi({ param: { name: 'token', in: 'path' }, description: 'the token of the link' }),
})

const htmlPage = (description: string) => ({ description, content: { 'text/html': { schema: z.string() } } })

const invalid = {
  description: 'Not a link this Worker signed (forged, cut short, another key): nothing changed',
  content: { 'text/html': { schema: z.string() }, 'application/json': { schema: ErrorSchema } },
}

const show = createRoute({
  method: 'get',
  path: '/{token}',
  summary: 'The unsubscribe page of a link: a question and a button; changes nothing',
  request: { params: TokenParam },
  responses: { 200: htmlPage('The confirmation page'), 400: invalid },
})

const unsubscribe = createRoute({
  method: 'post',
  path: '/{token}',
  summary: 'One-click unsubscribe (RFC 8058): opts the link’s user out of its kind and channel',
  description:
    'No other authentication: the signed token is the proof. Idempotent. Mail providers POST `List-Unsubscribe=One-Click` here; the body is not read.',
  request: { params: TokenParam },
  responses: { 200: htmlPage('Unsubscribed (now or before)'), 400: invalid },
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

/** A browser gets a page that says the link is not valid; anything else the coded error. */
function refuse(c: Context<AppEnv>) {
  if ((c.req.header('accept') ?? '').includes('text/html')) {
    const locale = pageLocaleOf(c.req.header('accept-language'), configOf(c.env).DEFAULT_LOCALE)
    return c.html(invalidPage(locale), 400)
  }
  throw new ApiError('INVALID_REQUEST', 'not an unsubscribe link this Worker signed', [
    { field: 'token', message: 'not an unsubscribe link this Worker signed; nothing was changed' },
  ])
}

/** `/u`: one-click unsubscribe links, reachable by recipients without any token but the link's own. */
export const unsubscribeLinks = createRouter()

// A personal page: never cached by a proxy, never indexed.
unsubscribeLinks.use(async (c, next) => {
  await next()
  c.header('cache-control', 'no-store')
})

unsubscribeLinks
  .openapi(show, async (c) => {
    const resolved = await resolve(c, c.req.valid('param').token)
    if (!resolved) return refuse(c)
    return c.html(confirmPage(resolved.locale, resolved.label), 200)
  })
  .openapi(unsubscribe, async (c) => {
    const resolved = await resolve(c, c.req.valid('param').token)
    if (!resolved) return refuse(c)
    await optOut(c.env.DB, resolved.scope, new Date().toISOString()).run()
    return c.html(donePage(resolved.locale, resolved.label), 200)
  })
