/**
 * The bench's bare Worker (bench/bare-worker/wrangler.toml): what a queue
 * consumer costs under this wrangler with nothing of notify-edge in it.
 * `POST /enqueue?queue=bare-d1|bare-send&n=` puts n messages on a queue
 * (sendBatch, 100 a time); `GET /done?queue=` counts what its consumer finished.
 */
import { EmailMessage } from 'cloudflare:email'

type Env = { DB: D1Database; D1_ONLY: Queue; SEND: Queue; EMAIL: SendEmail }
type Body = { id: string }

const FROM = 'bench@notify-edge.example'

/** A fixed, minimal MIME message: no builder, no template. */
function mime(id: string): string {
  return [
    `From: Bench <${FROM}>`,
    'To: <bench@example.com>',
    `Message-ID: <${id}@notify-edge.example>`,
    'Subject: bench',
    'MIME-Version: 1.0',
    'Content-Type: text/plain; charset=utf-8',
    '',
    `bench ${id}`,
    '',
  ].join('\r\n')
}

async function record(env: Env, queue: string, ids: string[]): Promise<void> {
  const at = new Date().toISOString()
  const insert = env.DB.prepare('INSERT OR IGNORE INTO done (id, queue, at) VALUES (?1, ?2, ?3)')
  await env.DB.batch(ids.map((id) => insert.bind(id, queue, at)))
}

export default {
  async fetch(request: Request, env: Env): Promise<Response> {
    const url = new URL(request.url)
    const queue = url.searchParams.get('queue') ?? ''
    if (url.pathname === '/healthz') return Response.json({ status: 'ok' })
    if (url.pathname === '/done') {
      const row = await env.DB.prepare('SELECT count(*) AS n FROM done WHERE queue = ?1')
        .bind(queue)
        .first<{ n: number }>()
      return Response.json({ done: row?.n ?? 0 })
    }
    if (url.pathname === '/enqueue' && request.method === 'POST') {
      const target = queue === 'bare-send' ? env.SEND : queue === 'bare-d1' ? env.D1_ONLY : undefined
      if (!target) return Response.json({ error: 'queue must be bare-d1 or bare-send' }, { status: 400 })
      const n = Number(url.searchParams.get('n') ?? '0')
      for (let sent = 0; sent < n; sent += 100) {
        const size = Math.min(100, n - sent)
        await target.sendBatch(Array.from({ length: size }, () => ({ body: { id: crypto.randomUUID() } })))
      }
      return Response.json({ enqueued: n })
    }
    return new Response('not found', { status: 404 })
  },

  async queue(batch: MessageBatch<Body>, env: Env): Promise<void> {
    const ids = batch.messages.map((message) => message.body.id)
    if (batch.queue === 'bare-send') {
      await Promise.all(ids.map((id) => env.EMAIL.send(new EmailMessage(FROM, 'bench@example.com', mime(id)))))
    }
    await record(env, batch.queue, ids)
    batch.ackAll()
  },
}
