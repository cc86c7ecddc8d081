import { z } from '@hono/zod-openapi'
import { configOf } from '../../config.ts'
import { Id } from '../../contracts/fields.ts'
import { allShardDbs } from '../../d1/shards.ts'
import { eraseRecipient } from '../../erasure/erase.ts'
import { ERASED_TABLES } from '../../erasure/statements.ts'
import { ADMIN_ERRORS, BODY_ERRORS, createRouter, errors, json, jsonBody } from '../openapi.ts'
import { operatorRoute } from '../roles.ts'

const ErasureRequest = z
  .union([
    z.strictObject({ userId: Id.openapi({ description: "the recipient's user id" }) }),
    z.strictObject({
      address: z.email().max(320).openapi({ description: 'an address of the recipient', example: 'user@example.com' }),
    }),
  ])
  .openapi('ErasureRequest')

const Erasure = z
  .object({
    target: z.string().openapi({
      description: "how the audit trail names the person: the user id, or the address's pseudonym (`hmac:…`)",
    }),
    erased: z
      .object(Object.fromEntries(ERASED_TABLES.map(({ name }) => [name, z.number().int()])))
      .openapi({ description: 'rows erased (or, for suppressions and audit targets, pseudonymized) per table' }),
  })
  .openapi('Erasure')

const erase = operatorRoute('admin', {
  method: 'post',
  path: '/',
  summary: 'Erase a recipient from every table',
  description:
    'By user id or by address. Contacts, preferences and the reviewer entry are deleted; notifications lose their recipient snapshot and content (ids, status and times stay; one not yet sent ends `undeliverable`); sent messages are deleted; delivery events lose their detail; dead letters that name the person lose their message; a suppression is kept under the address’s pseudonym only, so the address stays suppressed; audit targets that were the address become the pseudonym; the in-app feed is emptied. Erasing twice changes nothing the second time.',
  request: { body: jsonBody(ErasureRequest) },
  responses: {
    200: json(Erasure, 'Erased: the rows changed per table (all 0 when nothing was left)'),
    ...errors(...BODY_ERRORS, ...ADMIN_ERRORS),
  },
})

/** `/v1/erasures`: a recipient's right to erasure, in one audited call. */
export const erasures = createRouter().openapi(erase, async (c) => {
  const request = c.req.valid('json')
  const result = await eraseRecipient(
    allShardDbs(c.env),
    configOf(c.env).erasureKey,
    c.get('operator'),
    request,
    new Date(),
    (userId) => c.env.INBOX.getByName(userId).erase(),
  )
  return c.json(result, 200)
})
