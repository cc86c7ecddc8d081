/**
 * A host application in miniature, for the inbox's browser tests, the demo
 * and the bench: a page that drops `<notify-inbox>` in from the Worker's
 * versioned path, and the address the element asks for its user's token,
 * which this host signs with the secret it shares with the Worker, as
 * docs/inbox.md shows a host doing. The user is named in the page's address
 * (`/?user=…`): a real host knows its signed-in user from its own session.
 */
import { createHmac } from 'node:crypto'
import { readFileSync } from 'node:fs'
import { createServer } from 'node:http'
import type { AddressInfo } from 'node:net'

/** The inbox client's version, as the Worker serves it: /inbox-client/<version>/. */
export const CLIENT_VERSION = (
  JSON.parse(readFileSync(new URL('../packages/inbox/package.json', import.meta.url), 'utf8')) as { version: string }
).version

/** An inbox token (HS256 JWT) for `userId`, ending in `seconds`. */
export function inboxToken(userId: string, secret: string, seconds = 3600): string {
  const part = (value: unknown) => Buffer.from(JSON.stringify(value)).toString('base64url')
  const exp = Math.floor(Date.now() / 1000) + seconds
  const unsigned = `${part({ alg: 'HS256', typ: 'JWT' })}.${part({ sub: userId, aud: 'notify-edge:inbox', exp })}`
  return `${unsigned}.${createHmac('sha256', secret).update(unsigned).digest('base64url')}`
}

/** A running host. */
export type InboxHost = {
  url: string
  /** The page of `userId`'s inbox. */
  page: (userId: string, options?: { lang?: string; heartbeatSeconds?: number }) => string
  /** How many tokens were asked for, by user. */
  tokensGiven: Map<string, number>
  stop: () => Promise<void>
}

/**
 * Serves the host on `port` (a free one when 0): `/` the page, `/token?user=`
 * a token lasting `tokenSeconds`. `workerUrl` is where the page reaches the
 * Worker (the element's `src`); the Worker must list this host's origin in
 * INBOX_ALLOWED_ORIGINS.
 */
export async function startInboxHost(options: {
  workerUrl: string
  secret: string
  port?: number
  tokenSeconds?: number
}): Promise<InboxHost> {
  const tokensGiven = new Map<string, number>()
  const server = createServer((request, response) => {
    const url = new URL(request.url ?? '/', 'http://host')
    const user = url.searchParams.get('user') ?? ''
    if (url.pathname === '/token' && user !== '') {
      tokensGiven.set(user, (tokensGiven.get(user) ?? 0) + 1)
      response.writeHead(200, { 'content-type': 'application/json', 'cache-control': 'no-store' })
      response.end(JSON.stringify({ token: inboxToken(user, options.secret, options.tokenSeconds) }))
      return
    }
    if (url.pathname === '/' && user !== '') {
      response.writeHead(200, { 'content-type': 'text/html; charset=utf-8' })
      response.end(pageHtml(options.workerUrl, user, url.searchParams))
      return
    }
    response.writeHead(404, { 'content-type': 'text/plain' })
    response.end('not found')
  })
  await new Promise<void>((resolve) => server.listen(options.port ?? 0, '127.0.0.1', resolve))
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`
  return {
    url,
    tokensGiven,
    page: (userId, { lang = 'en', heartbeatSeconds } = {}) => {
      const query = new URLSearchParams({ user: userId, lang })
      if (heartbeatSeconds !== undefined) query.set('heartbeat', String(heartbeatSeconds))
      return `${url}/?${query}`
    },
    stop: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections()
        server.close(() => resolve())
      }),
  }
}

const escapeHtml = (text: string) => text.replace(/[&<>"']/g, (char) => `&#${char.charCodeAt(0)};`)

function pageHtml(workerUrl: string, user: string, query: URLSearchParams): string {
  const lang = query.get('lang') === 'ru' ? 'ru' : 'en'
  const heartbeat = Number(query.get('heartbeat'))
  const token = `/token?user=${encodeURIComponent(user)}`
  return `<!doctype html>
<html lang="${lang}">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>${lang === 'ru' ? 'Кабинет' : 'Your workspace'}: notify-edge inbox demo</title>
<script type="module" src="${escapeHtml(workerUrl)}/inbox-client/${CLIENT_VERSION}/notify-inbox.js"></script>
<style>
body { margin: 0; font: 16px/1.5 system-ui, sans-serif; color: #1a1a1a; }
header { display: flex; align-items: center; justify-content: space-between; gap: 12px; padding: 8px 16px; border-bottom: 1px solid #ddd; }
main { padding: 16px; max-width: 720px; }
h1 { font-size: 20px; margin: 0; }
</style>
</head>
<body>
<header>
<h1>${lang === 'ru' ? 'Кабинет' : 'Your workspace'}</h1>
<notify-inbox src="${escapeHtml(workerUrl)}" token-url="${escapeHtml(token)}"${heartbeat > 0 ? ` heartbeat-seconds="${heartbeat}"` : ''}></notify-inbox>
</header>
<main>
<p>${lang === 'ru' ? 'Пользователь' : 'Signed in as'} <code>${escapeHtml(user)}</code>.</p>
<p>${lang === 'ru' ? 'Новые уведомления появляются в колокольчике сразу, без перезагрузки.' : 'New notifications appear in the bell as they arrive, without a reload.'}</p>
</main>
</body>
</html>`
}
