import { z } from '@hono/zod-openapi'
import { ApiError } from '../../errors.ts'
import { EXPIRES_HEADER, SOCKET_PROTOCOL } from '../../inbox/inbox-feed.ts'
import { MARKS, type Mark } from '../../inbox/item.ts'
import { BODY_ERRORS, createRouter, errors, json, jsonBody } from '../openapi.ts'
import { recipientRoute } from '../roles.ts'

const CountsSchema = z
  .object({
    unseen: z.number().int().nonnegative().openapi({ description: 'items not seen yet, archived ones aside' }),
    unread: z.number().int().nonnegative().openapi({ description: 'items not read yet, archived ones aside' }),
  })
  .openapi('InboxCounts')

const ItemSchema = z
  .object({
    id: z.string().openapi({ description: 'the notification it shows' }),
    kind: z.string(),
    title: z.string(),
    body: z.string(),
    link: z.string().nullable(),
    action: z.object({ label: z.string(), url: z.string() }).nullable(),
    seq: z.number().int().openapi({ description: 'its place in the feed: each item added takes a larger one' }),
    createdAt: z.string(),
    seenAt: z.string().nullable(),
    readAt: z.string().nullable(),
    archivedAt: z.string().nullable(),
    version: z.number().int().openapi({ description: 'the change number of its last change' }),
  })
  .openapi('InboxItem')

const page = recipientRoute({
  method: 'get',
  path: '/',
  summary: 'The caller’s in-app feed, newest first',
  description:
    'A page of the items of the user the inbox token names, with the counts and the feed’s change number (a socket opened with `?after=` it gets every change since). `nextBefore` continues.',
  request: {
    query: z.object({
      limit: z.coerce.number().int().min(1).max(100).default(20),
      before: z.coerce.number().int().min(1).optional().openapi({ description: 'a `nextBefore` a page gave' }),
      archived: z
        .enum(['true', 'false'])
        .default('false')
        .openapi({ description: 'archived items too (by default only the others)' }),
    }),
  },
  responses: {
    200: json(
      z.object({
        items: z.array(ItemSchema),
        feed: z.string().openapi({ description: 'the feed’s name: another one means it was erased and made again' }),
        counts: CountsSchema,
        version: z.number().int(),
        nextBefore: z.number().int().nullable(),
      }),
      'A page',
    ),
    ...errors(400),
  },
})

const TargetSchema = z
  .union([
    z.object({ ids: z.array(z.string().min(1).max(128)).min(1).max(100) }).strict(),
    z.object({ all: z.literal(true) }).strict(),
  ])
  .openapi({ description: 'the items, by id (at most 100), or `{"all": true}` for every item of the feed' })

/** `POST /seen`, `/read`, `/archived`: one route a mark. */
const marking = (mark: Mark) =>
  recipientRoute({
    method: 'post',
    path: `/${mark}`,
    summary: `Marks items ${mark}`,
    description: `Marks the caller’s items (by id, or all) ${mark}${mark === 'read' ? ' (and seen)' : ''} where they are not yet; ids of items that are not in the caller’s feed change nothing. Every open socket of the user is told.`,
    request: { body: jsonBody(TargetSchema) },
    responses: {
      200: json(
        z.object({
          changed: z.boolean().openapi({ description: 'whether any item took the mark' }),
          counts: CountsSchema,
        }),
        'Marked',
      ),
      ...errors(...BODY_ERRORS, 413),
    },
  })

const socket = recipientRoute({
  method: 'get',
  path: '/socket',
  summary: 'The caller’s feed, live (WebSocket)',
  description: `A WebSocket (subprotocol \`${SOCKET_PROTOCOL}\`; a browser passes its token as a second subprotocol, \`bearer.<token>\`). With \`?after=<version>&feed=<feed>\` it first sends every item changed since (\`missed\`, each once, in order), then \`state\` (feed, counts, version; \`reset\` when the client is to read its feed again from the first page: another feed, or more than 1,000 changes behind), then each change as it happens (\`added\`, \`marked\`). \`ping\` is answered \`pong\`. It closes with code 4001 when the token expires: ask the host application for a new one and come back with the last version seen.`,
  request: {
    query: z.object({
      after: z.coerce.number().int().min(0).optional().openapi({ description: 'the last `version` the client saw' }),
      feed: z
        .string()
        .regex(/^[0-9a-f]{16}$/)
        .optional()
        .openapi({ description: 'the `feed` that version is of, as `state` and pages name it' }),
    }),
  },
  responses: {
    101: { description: 'Switching to the WebSocket' },
    ...errors(400),
  },
})

/** Whether a socket's client offered the inbox's subprotocol. */
const offered = (header: string | undefined) =>
  (header ?? '').split(',').some((value) => value.trim() === SOCKET_PROTOCOL)

/** An end user's in-app feed: the pages, the marks and the live socket, each of the token's user only. */
export const inbox = createRouter()
  .openapi(page, async (c) => {
    const { limit, before, archived } = c.req.valid('query')
    const feed = c.env.INBOX.getByName(c.get('recipient').userId)
    return c.json(await feed.page({ limit, before, archived: archived === 'true' }), 200)
  })
  .openapi(socket, async (c) => {
    if (c.req.header('upgrade')?.toLowerCase() !== 'websocket') {
      throw new ApiError('INVALID_REQUEST', 'this route opens a WebSocket: send `Upgrade: websocket`', [
        { field: 'upgrade', message: 'expected websocket' },
      ])
    }
    const { userId, expiresAt } = c.get('recipient')
    const { after, feed: known } = c.req.valid('query')
    const url = new URL('https://inbox/socket')
    if (after !== undefined) url.searchParams.set('after', String(after))
    if (known !== undefined) url.searchParams.set('feed', known)
    const feed = c.env.INBOX.getByName(userId)
    const opened = await feed.fetch(url, { headers: { upgrade: 'websocket', [EXPIRES_HEADER]: String(expiresAt) } })
    // The object's answer has immutable headers; the API's own (secure headers) go on a copy. The subprotocol
    // is named only to a client that offered it: one that offered none must fail a socket that names one.
    const headers = new Headers(opened.headers)
    if (!offered(c.req.header('sec-websocket-protocol'))) headers.delete('sec-websocket-protocol')
    return new Response(opened.body, { status: opened.status, headers, webSocket: opened.webSocket })
  })

for (const mark of MARKS) {
  inbox.openapi(marking(mark), async (c) => {
    const target = c.req.valid('json')
    const feed = c.env.INBOX.getByName(c.get('recipient').userId)
    return c.json(await feed.mark(mark, target, new Date().toISOString()), 200)
  })
}

// Anything else under /v1/inbox is no route of an end user's, and not an operator's either: answered
// here, so that it never reaches the operator space's check of an operator token.
inbox.all('*', (c) => {
  throw new ApiError('NOT_FOUND', `no route ${c.req.method} ${c.req.path}`)
})
