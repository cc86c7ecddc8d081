import { utf8Length } from '@notify-edge/contracts'
import type { SendPace } from '../src/dispatch/pace/send-pace.ts'

/** What one invocation asked of the platform, in the units Cloudflare limits it by. */
export type Usage = {
  d1: {
    /** Calls to D1: each `batch()`, `exec()` or statement run on its own is one request, a subrequest. */
    calls: number
    /** Statements sent, those inside batches included. */
    statements: number
    largestBatch: number
    /** The most parameters bound to one statement. */
    maxBoundParameters: number
    /** The longest SQL text of one statement, in UTF-8 bytes. */
    maxStatementBytes: number
    /** The largest value bound to a statement, in bytes. */
    maxValueBytes: number
    /** Characters of text in what D1 answered: each of them is held in the isolate's memory at least once. */
    charsRead: number
  }
  queues: {
    /** `send()` and `sendBatch()` calls: each is a subrequest. */
    calls: number
    messages: number
    maxMessagesPerCall: number
    /** The largest call, in bytes of JSON bodies. */
    maxBytesPerCall: number
    maxMessageBytes: number
    bytesSent: number
  }
  kv: { calls: number }
  /** Calls to a Durable Object through a stub of SEND_PACE (the send pace): each is a subrequest. */
  durableObjects: { calls: number }
  /** Every call above: what Cloudflare counts against the invocation's subrequests. */
  subrequests: number
}

const EXECUTIONS = new Set(['run', 'all', 'first', 'raw'])
const KV_OPERATIONS = new Set(['get', 'getWithMetadata', 'put', 'delete', 'list'])

/**
 * The env with its D1, queue, KV and Durable Object bindings counted, for one invocation
 * (`worker.queue`, `worker.fetch`) the test hands it to. Every call still
 * goes to the real local binding. A statement's SQL and parameters are read
 * from workerd's `D1PreparedStatement` (`statement`, `params`), through any
 * wrapper the Worker adds, so statements prepared anywhere are measured.
 */
export function meterEnv(env: Env): { env: Env; usage: () => Usage } {
  const d1 = {
    calls: 0,
    statements: 0,
    largestBatch: 0,
    maxBoundParameters: 0,
    maxStatementBytes: 0,
    maxValueBytes: 0,
    charsRead: 0,
  }
  const queues = { calls: 0, messages: 0, maxMessagesPerCall: 0, maxBytesPerCall: 0, maxMessageBytes: 0, bytesSent: 0 }
  const kv = { calls: 0 }
  const durableObjects = { calls: 0 }

  const inspect = (statement: unknown) => {
    const { statement: sql, params } = statement as { statement?: unknown; params?: unknown }
    if (typeof sql !== 'string' || !Array.isArray(params)) {
      throw new Error("workerd's D1PreparedStatement no longer exposes `statement` and `params`: update the meter")
    }
    d1.statements += 1
    d1.maxBoundParameters = Math.max(d1.maxBoundParameters, params.length)
    d1.maxStatementBytes = Math.max(d1.maxStatementBytes, utf8Length(sql))
    for (const value of params) d1.maxValueBytes = Math.max(d1.maxValueBytes, bytesOf(value))
  }
  const read = async <T>(answer: Promise<T>): Promise<T> => {
    const value = await answer
    d1.charsRead += charsIn(value)
    return value
  }

  const wrapStatement = (statement: D1PreparedStatement): D1PreparedStatement =>
    new Proxy(statement, {
      get(target, property) {
        const value = Reflect.get(target, property)
        if (typeof value !== 'function') return value
        if (property === 'bind') return (...args: unknown[]) => wrapStatement(value.apply(target, args))
        if (EXECUTIONS.has(String(property))) {
          return (...args: unknown[]) => {
            d1.calls += 1
            inspect(target)
            return read(value.apply(target, args))
          }
        }
        return value.bind(target)
      },
    })
  const db = new Proxy(env.DB, {
    get(target, property) {
      const value = Reflect.get(target, property)
      if (property === 'prepare') return (query: string) => wrapStatement(target.prepare(query))
      if (property === 'batch') {
        return (statements: D1PreparedStatement[]) => {
          d1.calls += 1
          d1.largestBatch = Math.max(d1.largestBatch, statements.length)
          for (const statement of statements) inspect(statement)
          return read(target.batch(statements))
        }
      }
      if (property === 'exec') {
        return (query: string) => {
          d1.calls += 1
          d1.statements += query.split('\n').filter((line) => line.trim() !== '').length
          return target.exec(query)
        }
      }
      return typeof value === 'function' ? value.bind(target) : value
    },
  })

  const sent = (bodies: unknown[]) => {
    const sizes = bodies.map((body) => utf8Length(JSON.stringify(body)))
    const bytes = sizes.reduce((sum, size) => sum + size, 0)
    queues.calls += 1
    queues.messages += bodies.length
    queues.bytesSent += bytes
    queues.maxMessagesPerCall = Math.max(queues.maxMessagesPerCall, bodies.length)
    queues.maxBytesPerCall = Math.max(queues.maxBytesPerCall, bytes)
    queues.maxMessageBytes = Math.max(queues.maxMessageBytes, ...sizes)
  }
  const queue = (real: Queue): Queue =>
    new Proxy(real, {
      get(target, property) {
        const value = Reflect.get(target, property)
        if (property === 'send') {
          return (body: unknown, options?: QueueSendOptions) => {
            sent([body])
            return target.send(body, options)
          }
        }
        if (property === 'sendBatch') {
          return (messages: Iterable<MessageSendRequest>, options?: QueueSendBatchOptions) => {
            const list = [...messages]
            sent(list.map((message) => message.body))
            return target.sendBatch(list, options)
          }
        }
        return typeof value === 'function' ? value.bind(target) : value
      },
    })
  const idempotency = new Proxy(env.IDEMPOTENCY, {
    get(target, property) {
      const value = Reflect.get(target, property)
      if (typeof value !== 'function') return value
      if (KV_OPERATIONS.has(String(property))) {
        return (...args: unknown[]) => {
          kv.calls += 1
          return value.apply(target, args)
        }
      }
      return value.bind(target)
    },
  })

  // A stub's methods are its RPC calls; `then` is not one (a stub is not a promise). Reflect.apply:
  // on an RPC method, `.apply` would itself be taken for the name of a remote method.
  const stub = (real: DurableObjectStub<SendPace>): DurableObjectStub<SendPace> =>
    new Proxy(real, {
      get(target, property) {
        const value = Reflect.get(target, property)
        if (property === 'then' || typeof value !== 'function') return value
        return (...args: unknown[]) => {
          durableObjects.calls += 1
          return Reflect.apply(value, target, args)
        }
      },
    })
  const sendPace = new Proxy(env.SEND_PACE, {
    get(target, property) {
      const value = Reflect.get(target, property)
      if (property === 'get' || property === 'getByName') {
        return (...args: unknown[]) => stub(Reflect.apply(value, target, args) as DurableObjectStub<SendPace>)
      }
      return typeof value === 'function' ? value.bind(target) : value
    },
  })

  return {
    env: {
      ...env,
      DB: db,
      EVENTS: queue(env.EVENTS),
      DISPATCH: queue(env.DISPATCH),
      DLQ: queue(env.DLQ),
      EMAIL_EVENTS: queue(env.EMAIL_EVENTS),
      IDEMPOTENCY: idempotency,
      SEND_PACE: sendPace,
    } as Env,
    usage: () => ({
      d1: { ...d1 },
      queues: { ...queues },
      kv: { ...kv },
      durableObjects: { ...durableObjects },
      subrequests: d1.calls + queues.calls + kv.calls + durableObjects.calls,
    }),
  }
}

function bytesOf(value: unknown): number {
  if (typeof value === 'string') return utf8Length(value)
  if (value instanceof ArrayBuffer) return value.byteLength
  if (Array.isArray(value)) return value.length
  return 8
}

/** Characters of every string in a D1 answer (rows, values, arrays of them). */
function charsIn(value: unknown, depth = 0): number {
  if (typeof value === 'string') return value.length
  if (depth > 6 || typeof value !== 'object' || value === null) return 0
  let total = 0
  for (const item of Array.isArray(value) ? value : Object.values(value)) total += charsIn(item, depth + 1)
  return total
}
