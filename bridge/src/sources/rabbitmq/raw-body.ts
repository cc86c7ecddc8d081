import { createRequire } from 'node:module'

/** Where the content type of a delivery travels past rabbitmq-client's body parsing. */
export const CONTENT_TYPE = Symbol('notify-edge.content-type')

/** The types rabbitmq-client parses (5.0.x, `Channel#_onBody`): JSON is parsed, text decoded. */
const PARSED = new Set(['application/json', 'text/plain'])

type HeaderFrame = { fields: Record<string | symbol, unknown> }
type ChannelPrototype = { _onHeader?: (this: unknown, frame: HeaderFrame) => unknown }

let installed = false

/**
 * Keeps every delivery's body as the bytes the broker holds. rabbitmq-client
 * parses `application/json` bodies and decodes `text/plain` ones, with no
 * option to turn it off; serialising the parsed value again changes the bytes
 * (integers past 2^53 rounded, whitespace and escapes rewritten) and the
 * decoding loses invalid UTF-8. This wraps the channel's header-frame handler
 * (the library is pinned) so those two types are moved aside before the body
 * is assembled and read back from `message[CONTENT_TYPE]`. Throws at start,
 * not silently, if the library no longer has that handler.
 */
export function keepRawBodies(): void {
  if (installed) return
  const require = createRequire(import.meta.url)
  const { Channel } = require('rabbitmq-client/lib/Channel.js') as { Channel?: { prototype: ChannelPrototype } }
  const original = Channel?.prototype._onHeader
  if (!Channel || typeof original !== 'function') {
    throw new Error('rabbitmq-client has no Channel#_onHeader: cannot keep message bodies as bytes; check its version')
  }
  Channel.prototype._onHeader = function onHeader(this: unknown, frame: HeaderFrame) {
    const type = frame.fields.contentType
    if (typeof type === 'string' && PARSED.has(type)) {
      frame.fields[CONTENT_TYPE] = type
      frame.fields.contentType = undefined
    }
    return original.call(this, frame)
  }
  installed = true
}

/** The content type the publisher set, whether or not it was moved aside. */
export function contentTypeOf(message: { contentType?: string }): string | undefined {
  const moved = (message as Record<symbol, unknown>)[CONTENT_TYPE]
  return typeof moved === 'string' ? moved : message.contentType
}
