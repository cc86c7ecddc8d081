import { z } from '@hono/zod-openapi'
import { Id, Locale, TimeZone } from '../../contracts/fields.ts'
import { shardDbOfUser } from '../../d1/shards.ts'
import { ApiError } from '../../errors.ts'
import { type ContactRow, contactFromRow, correctContact, upsertContact } from '../../materialize/contacts.ts'
import { runAudited } from '../audited.ts'
import { ADMIN_ERRORS, BODY_ERRORS, createRouter, errors, json, jsonBody } from '../openapi.ts'
import { operatorRoute } from '../roles.ts'

const UserParam = z.object({ userId: Id.openapi({ param: { name: 'userId', in: 'path' } }) })
const Contact = z
  .object({
    userId: z.string(),
    email: z.string(),
    locale: z.string().nullable(),
    timeZone: z.string().nullable(),
    displayName: z.string().nullable(),
    version: z.number().openapi({ description: "the producer's version (-1: created by an operator)" }),
    updatedAt: z.string(),
    operatorEditedAt: z
      .string()
      .nullable()
      .openapi({ description: "when an operator corrected it; the producer's next version replaces the correction" }),
  })
  .openapi('Contact')

type Row = ContactRow & { updated_at: string; operator_edited_at: string | null }

const toContact = (row: Row): z.infer<typeof Contact> => ({
  ...contactFromRow(row),
  updatedAt: row.updated_at,
  operatorEditedAt: row.operator_edited_at,
})

const find = (db: D1Database, userId: string) =>
  db.prepare('SELECT * FROM contacts WHERE user_id = ?1').bind(userId).first<Row>()

const get = operatorRoute('viewer', {
  method: 'get',
  path: '/{userId}',
  summary: 'A contact of the replica',
  request: { params: UserParam },
  responses: { 200: json(Contact, 'The contact'), ...errors(400, 404, ...ADMIN_ERRORS) },
})

const put = operatorRoute('admin', {
  method: 'put',
  path: '/{userId}',
  summary: 'Create or update a contact',
  description:
    "With `version`, it speaks for the producer and is guarded like contact-upserted: an older or equal version is refused (409). Without it, it is an operator's correction: the fields change, the producer's version does not, and the producer's next update (a higher version) replaces the correction.",
  request: {
    params: UserParam,
    body: jsonBody(
      z.object({
        email: z.email(),
        locale: Locale.nullish(),
        timeZone: TimeZone.nullish(),
        displayName: z.string().max(500).nullish(),
        version: z.number().int().nonnegative().optional(),
      }),
    ),
  },
  responses: { 200: json(Contact, 'Saved'), ...errors(...BODY_ERRORS, 409, ...ADMIN_ERRORS) },
})

const remove = operatorRoute('admin', {
  method: 'delete',
  path: '/{userId}',
  summary: 'Delete a contact (later notifications to this user end undeliverable)',
  request: { params: UserParam },
  responses: { 204: { description: 'Deleted' }, ...errors(400, 404, ...ADMIN_ERRORS) },
})

/** `/v1/contacts`: the contact replica the PIN events read addresses from. */
export const contacts = createRouter()
  .openapi(get, async (c) => {
    const { userId } = c.req.valid('param')
    const row = await find(await shardDbOfUser(c.env, userId), userId)
    if (!row) throw new ApiError('NOT_FOUND', 'no such contact')
    return c.json(toContact(row), 200)
  })
  .openapi(put, async (c) => {
    const { userId } = c.req.valid('param')
    const body = c.req.valid('json')
    // The contact is in its person's D1 shard (src/d1/shards.ts).
    const db = await shardDbOfUser(c.env, userId)
    const current = await find(db, userId)
    const { version } = body
    const now = new Date().toISOString()
    const contact = {
      userId,
      email: body.email,
      locale: body.locale ?? null,
      timeZone: body.timeZone ?? null,
      displayName: body.displayName ?? null,
    }
    const statement =
      version === undefined ? correctContact(db, contact, now) : upsertContact(db, { ...contact, version }, now)
    // The trail keeps what was set, not the address or the name themselves.
    const parameters = { version: version ?? 'correction', locale: contact.locale, timeZone: contact.timeZone }
    const [result] = await runAudited(
      c,
      [statement],
      {
        action: 'contact.put',
        target: userId,
        parameters,
      },
      db,
    )
    if (result?.meta.changes === 0) {
      throw new ApiError('CONFLICT', `version ${version} is not newer than the stored version ${current?.version}`)
    }
    return c.json(toContact((await find(db, userId)) as Row), 200)
  })
  .openapi(remove, async (c) => {
    const { userId } = c.req.valid('param')
    const db = await shardDbOfUser(c.env, userId)
    const [result] = await runAudited(
      c,
      [db.prepare('DELETE FROM contacts WHERE user_id = ?1').bind(userId)],
      { action: 'contact.delete', target: userId },
      db,
    )
    if (result?.meta.changes === 0) throw new ApiError('NOT_FOUND', 'no such contact')
    return c.body(null, 204)
  })
