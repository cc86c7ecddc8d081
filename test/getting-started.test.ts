import { env } from 'cloudflare:workers'
import { describe, expect, it, vi } from 'vitest'
import ingestSample from '../examples/ingest/response.created.json'
import ingestMissingEmail from '../examples/ingest/response.created.missing-email.json'
import { postIngest } from './helpers.ts'
import { allRows } from './shards.ts'

describe('getting started by hand (docs/getting-started.md), inside workerd', () => {
  it('the sample is accepted and processed; the one without recipient.email ends as one dead letter', async () => {
    const accepted = await postIngest(ingestSample)
    expect(accepted.status).toBe(202)
    expect(await accepted.json()).toEqual({ accepted: 1 })
    await vi.waitFor(
      async () => {
        // In the shard of its recipient, with D1 shards: read in every one.
        const [row = null] = await allRows(
          'SELECT outcome FROM processed_marks WHERE idempotency_key = ?',
          'arthunt:response.created:7f1a0c62-5b1b-4d1a-9f1c-44cf2df5a111',
        )
        // A response is told in its owner's digest; the digest closes (a second here) with this one alone.
        expect(row).toEqual({ outcome: 'digested' })
      },
      { timeout: 20_000, interval: 100 },
    )
    // So it goes out as itself, the email it would have been at once.
    await vi.waitFor(
      async () => {
        const [row = null] = await allRows(
          'SELECT status, subject FROM notifications WHERE event_id = ?1',
          '7f1a0c62-5b1b-4d1a-9f1c-44cf2df5a111',
        )
        expect(row).toEqual({ status: 'sent', subject: 'Новый отклик на ваш проект' })
      },
      { timeout: 20_000, interval: 100 },
    )

    expect((await postIngest(ingestMissingEmail)).status).toBe(202)
    const rows = await vi.waitFor(
      async () => {
        const { results } = await env.DB.prepare(
          "SELECT code, error FROM dead_letters WHERE source_message_id = '7f1a0c62-5b1b-4d1a-9f1c-44cf2df5a111:missing-email'",
        ).all()
        expect(results).toHaveLength(1)
        return results
      },
      { timeout: 20_000, interval: 100 },
    )
    expect(rows[0]).toMatchObject({
      code: 'NTF_INVALID_PAYLOAD',
      error: expect.stringContaining('data.recipient.email'),
    })
  })
})
