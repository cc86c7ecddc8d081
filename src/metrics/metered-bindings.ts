import type { Cost } from './cost.ts'

/** A KV namespace whose reads (per key) and writes (puts, deletes) are counted into `cost`. */
export function meteredKv(kv: KVNamespace, cost: Cost): KVNamespace {
  return new Proxy(kv, {
    get(target, property) {
      const value = Reflect.get(target, property)
      if (typeof value !== 'function') return value
      if (property === 'get' || property === 'getWithMetadata') {
        return (key: string | string[], ...rest: unknown[]) => {
          cost.kvReads += Array.isArray(key) ? key.length : 1
          return value.call(target, key, ...rest)
        }
      }
      if (property === 'put' || property === 'delete') {
        return (...args: unknown[]) => {
          cost.kvWrites += 1
          return value.apply(target, args)
        }
      }
      return value.bind(target)
    },
  })
}

/** A queue producer whose messages sent are counted into `cost`. */
export function meteredQueue<T extends Queue>(queue: T, cost: Cost): T {
  return new Proxy(queue, {
    get(target, property) {
      const value = Reflect.get(target, property)
      if (typeof value !== 'function') return value
      if (property === 'send' || property === 'sendBatch') {
        return (body: unknown, ...rest: unknown[]) => {
          cost.queueWrites += property === 'sendBatch' ? (body as unknown[]).length : 1
          return value.call(target, body, ...rest)
        }
      }
      return value.bind(target)
    },
  })
}

/**
 * A delivered batch whose messages count as read into `cost`, and each one
 * acknowledged as a delete. Each message keeps its identity for the whole
 * invocation (the consumers key their settlements by message).
 */
export function meteredBatch<T>(batch: MessageBatch<T>, cost: Cost): MessageBatch<T> {
  cost.queueReads += batch.messages.length
  const messages = batch.messages.map(
    (message) =>
      new Proxy(message, {
        get(target, property) {
          const value = Reflect.get(target, property)
          if (property === 'ack') {
            return () => {
              cost.queueDeletes += 1
              target.ack()
            }
          }
          return typeof value === 'function' ? value.bind(target) : value
        },
      }),
  )
  return new Proxy(batch, {
    get(target, property) {
      if (property === 'messages') return messages
      const value = Reflect.get(target, property)
      if (property === 'ackAll') {
        return () => {
          cost.queueDeletes += messages.length
          target.ackAll()
        }
      }
      return typeof value === 'function' ? value.bind(target) : value
    },
  })
}
