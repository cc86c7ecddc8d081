import { z } from '@hono/zod-openapi'
import { Hono } from 'hono'
import { Webhook, WebhookVerificationError } from 'svix'
import { configOf } from '../../config.ts'
import { RESEND_DELIVERY_TYPES } from '../../delivery/resend.ts'
import { ApiError } from '../../errors.ts'
import { loggerFor } from '../../log.ts'
import { type AppEnv, errors, json } from '../openapi.ts'
import { SECURITY_OF } from '../roles.ts'

/** Largest webhook body accepted; Resend's delivery events are a few KB. */
const WEBHOOK_MAX_BYTES = 256 * 1024

const SVIX_HEADERS = ['svix-id', 'svix-timestamp', 'svix-signature'] as const

/** The answer to a verified webhook: whether its event went onto `notify-email-events`. */
const Received = z.object({ received: z.literal(true), queued: z.boolean() })

/** The OpenAPI description of `POST /v1/webhooks/resend` (the route reads its body itself, as raw bytes). */
export const resendWebhookDoc = {
  method: 'post' as const,
  path: '/v1/webhooks/resend',
  summary: 'Resend delivery events (signed with Svix)',
  // No bearer token: the signature is the proof, checked by the route itself.
  security: SECURITY_OF.public,
  description:
    'Authenticated by its Svix signature (RESEND_WEBHOOK_SECRET), not a bearer token; a timestamp more than five minutes off is refused. A delivery event (`email.sent`, `.delivered`, `.delivery_delayed`, `.bounced`, `.complained`, `.failed`, `.suppressed`) is queued on notify-email-events and answered 202; any other verified event is answered 200 and dropped. Each event is recorded once, by its svix-id.',
  request: {
    headers: z.object({ 'svix-id': z.string(), 'svix-timestamp': z.string(), 'svix-signature': z.string() }),
    body: {
      content: { 'application/json': { schema: z.object({ type: z.string(), data: z.object({}).passthrough() }) } },
    },
  },
  responses: {
    202: json(Received, 'Verified and queued'),
    200: json(Received, 'Verified; not a delivery event, dropped'),
    ...errors(400, 401, 413, 415, 500, 503),
  },
}

/** The raw body, refused beyond the limit before it is all read. */
async function rawBody(request: Request): Promise<string> {
  const declared = Number(request.headers.get('content-length') ?? 0)
  if (declared > WEBHOOK_MAX_BYTES) throw new ApiError('PAYLOAD_TOO_LARGE', `body exceeds ${WEBHOOK_MAX_BYTES} bytes`)
  const bytes = await request.arrayBuffer()
  if (bytes.byteLength > WEBHOOK_MAX_BYTES)
    throw new ApiError('PAYLOAD_TOO_LARGE', `body exceeds ${WEBHOOK_MAX_BYTES} bytes`)
  return new TextDecoder().decode(bytes)
}

/**
 * `POST /v1/webhooks/resend`: verifies the Svix signature over the exact
 * bytes received (with Svix's own library), then puts a delivery event on
 * `notify-email-events`, answering only after the queue took it — so a
 * refused or lost event is retried by Resend, never dropped here.
 */
export const webhooks = new Hono<AppEnv>().post('/resend', async (c) => {
  const secret = configOf(c.env).RESEND_WEBHOOK_SECRET
  if (!secret)
    throw new ApiError('CONFIG_INVALID', 'RESEND_WEBHOOK_SECRET is not set: Resend webhooks cannot be verified')
  const missing = SVIX_HEADERS.filter((name) => !c.req.header(name))
  if (missing.length > 0) {
    throw new ApiError(
      'UNAUTHORIZED',
      'not a signed Resend webhook',
      missing.map((name) => ({ field: name, message: 'missing' })),
    )
  }
  const payload = await rawBody(c.req.raw)
  const headers = Object.fromEntries(SVIX_HEADERS.map((name) => [name, c.req.header(name) as string]))
  try {
    new Webhook(secret).verify(payload, headers)
  } catch (error) {
    if (!(error instanceof WebhookVerificationError)) throw error
    throw new ApiError('UNAUTHORIZED', `the Svix signature does not hold: ${error.message}`)
  }
  // Resend posts its events as JSON; a signed body of another type was not sent by Resend as
  // Resend sends, and is refused by its type, after the signature (an unsigned one is a 401 first).
  const mediaType = (c.req.header('content-type') ?? '').split(';')[0]?.trim().toLowerCase()
  if (mediaType !== 'application/json') {
    throw new ApiError(
      'UNSUPPORTED_MEDIA_TYPE',
      `a Resend webhook is application/json, not ${mediaType || 'untyped'}`,
      [{ field: 'content-type', message: 'must be application/json' }],
    )
  }
  let event: unknown
  try {
    event = JSON.parse(payload)
  } catch {
    throw new ApiError('INVALID_JSON', 'the signed body is not JSON', [{ field: 'body', message: 'not JSON' }])
  }
  const type = (event as { type?: unknown } | null)?.type
  if (typeof type !== 'string' || !(type in RESEND_DELIVERY_TYPES))
    return c.json({ received: true, queued: false }, 200)
  const svixId = headers['svix-id'] as string
  try {
    await c.env.EMAIL_EVENTS.send({ notifyEdgeResendEvent: 1, svixId, event }, { contentType: 'json' })
  } catch (cause) {
    loggerFor(c.env).error('webhook.queue-failed', { provider: 'resend', type, error: cause })
    throw new ApiError('QUEUE_UNAVAILABLE', 'notify-email-events did not take the event; Resend will retry')
  }
  return c.json({ received: true, queued: true }, 202)
})
