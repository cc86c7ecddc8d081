import { z } from '@hono/zod-openapi'
import { Id } from '../../contracts/fields.ts'
import { ApiError } from '../../errors.ts'
import { runAudited } from '../audited.ts'
import { ADMIN_ERRORS, createRouter, errors, json } from '../openapi.ts'
import { operatorRoute } from '../roles.ts'

const Reviewer = z.object({ userId: z.string(), addedAt: z.string() }).openapi('Reviewer')
const UserParam = z.object({ userId: Id.openapi({ param: { name: 'userId', in: 'path' } }) })

const list = operatorRoute('viewer', {
  method: 'get',
  path: '/',
  summary: 'The reviewer pool: told about verification requests that name no reviewer',
  responses: { 200: json(z.object({ items: z.array(Reviewer) }), 'The pool'), ...errors(...ADMIN_ERRORS) },
})

const put = operatorRoute('admin', {
  method: 'put',
  path: '/{userId}',
  summary: 'Add a reviewer to the pool (idempotent)',
  request: { params: UserParam },
  responses: { 200: json(Reviewer, 'In the pool'), ...errors(400, ...ADMIN_ERRORS) },
})

const remove = operatorRoute('admin', {
  method: 'delete',
  path: '/{userId}',
  summary: 'Remove a reviewer from the pool',
  request: { params: UserParam },
  responses: { 204: { description: 'Removed' }, ...errors(400, 404, ...ADMIN_ERRORS) },
})

/** `/v1/reviewers`: the reviewer pool. */
export const reviewers = createRouter()
  .openapi(list, async (c) => {
    const { results } = await c.env.DB.prepare(
      'SELECT user_id, added_at FROM reviewer_pool ORDER BY added_at, user_id',
    ).all<{
      user_id: string
      added_at: string
    }>()
    return c.json({ items: results.map((row) => ({ userId: row.user_id, addedAt: row.added_at })) }, 200)
  })
  .openapi(put, async (c) => {
    const { userId } = c.req.valid('param')
    // Already in the pool: nothing changes, and nothing is audited.
    await runAudited(
      c,
      [
        c.env.DB.prepare(
          'INSERT INTO reviewer_pool (user_id, added_at) VALUES (?1, ?2) ON CONFLICT (user_id) DO NOTHING',
        ).bind(userId, new Date().toISOString()),
      ],
      { action: 'reviewer.add', target: userId },
    )
    const row = await c.env.DB.prepare('SELECT added_at FROM reviewer_pool WHERE user_id = ?1')
      .bind(userId)
      .first<{ added_at: string }>()
    return c.json({ userId, addedAt: row?.added_at ?? '' }, 200)
  })
  .openapi(remove, async (c) => {
    const { userId } = c.req.valid('param')
    const [result] = await runAudited(
      c,
      [c.env.DB.prepare('DELETE FROM reviewer_pool WHERE user_id = ?1').bind(userId)],
      { action: 'reviewer.remove', target: userId },
    )
    if (result?.meta.changes === 0) throw new ApiError('NOT_FOUND', 'not in the reviewer pool')
    return c.body(null, 204)
  })
