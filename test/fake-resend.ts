/**
 * A stand-in for Resend's HTTP API, for tests only (an email provider cannot
 * run here). Runs in Node as miniflare's outbound service. The recipient's
 * local part picks the answer: `transient…` → 503, `ratelimited…` → 429,
 * `permanent…` → 422; anything else → 200 with id `re_{Idempotency-Key}`.
 */
export const FAKE_RESEND_URL = 'http://fake-resend.test'

export async function fakeResend(request: Request): Promise<Response> {
  const url = new URL(request.url)
  if (url.origin !== FAKE_RESEND_URL)
    return new Response(`unexpected outbound request to ${url.origin}`, { status: 599 })
  if (request.method !== 'POST' || url.pathname !== '/emails') return new Response('not found', { status: 404 })
  if (request.headers.get('authorization') !== 'Bearer test-resend-key')
    return new Response('unauthorized', { status: 401 })
  const body = (await request.json()) as { to?: string[]; subject?: string }
  const to = body.to?.[0] ?? ''
  if (to.startsWith('transient')) return new Response('{"message":"upstream unavailable"}', { status: 503 })
  if (to.startsWith('ratelimited')) return new Response('{"message":"slow down"}', { status: 429 })
  if (to.startsWith('permanent')) return new Response('{"message":"invalid to address"}', { status: 422 })
  const key = request.headers.get('idempotency-key')
  if (!key || !body.subject) return new Response('{"message":"missing idempotency key or subject"}', { status: 400 })
  return Response.json({ id: `re_${key}` })
}
