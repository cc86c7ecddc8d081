import { createExecutionContext, createScheduledController, waitOnExecutionContext } from 'cloudflare:test'
import { env } from 'cloudflare:workers'
import { describe, expect, it } from 'vitest'
import worker from '../src/index.ts'

async function insertProcessed(key: string, processedAt: string) {
  await env.DB.prepare(
    `INSERT INTO processed_marks (idempotency_key, event_id, contract, event_type, source, origin, source_message_id,
       outcome, received_at, processed_at)
     VALUES (?1, ?1, 'arthunt', 'response.created', 'http', 'test', ?1, 'accepted', ?2, ?2)`,
  )
    .bind(key, processedAt)
    .run()
}

describe('cron trigger', () => {
  it('deletes processed-event keys older than the retention (7 days) and keeps newer ones', async () => {
    const now = new Date('2026-11-29T12:00:00Z')
    await insertProcessed('retention:old', '2026-11-22T11:59:59.000Z')
    await insertProcessed('retention:new', '2026-11-22T12:00:01.000Z')
    const ctx = createExecutionContext()
    await worker.scheduled(createScheduledController({ scheduledTime: now, cron: '*/5 * * * *' }), env)
    await waitOnExecutionContext(ctx)
    const { results } = await env.DB.prepare(
      "SELECT idempotency_key FROM processed_marks WHERE idempotency_key LIKE 'retention:%'",
    ).all()
    expect(results).toEqual([{ idempotency_key: 'retention:new' }])
  })
})
