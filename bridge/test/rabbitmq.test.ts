/** The RabbitMQ source against this machine's real RabbitMQ (a queue and exchange per test). */
import assert from 'node:assert/strict'
import { execFileSync } from 'node:child_process'
import { after, before, test } from 'node:test'
import { INBOUND_EVENT_MAX_BYTES } from '@notify-edge/contracts'
import { Connection } from 'rabbitmq-client'
import { startBridge } from '../../support/bridge-process.ts'
import { assertNoLeaks } from '../../support/child-output.ts'
import { recordingSink } from '../../support/recording-sink.ts'
import { waitFor } from '../../support/wait.ts'

const URL = process.env.TEST_RABBITMQ_URL ?? 'amqp://guest:guest@127.0.0.1:5672'
const KEYS = ['notifications.email.response.created', 'notifications.email.invitation.created']
const rabbit = new Connection({ url: URL, connectionName: 'notify-edge-test' })
const cleanups: (() => Promise<unknown>)[] = []

before(async () => {
  execFileSync('bash', ['scripts/services-up.sh'], { stdio: 'ignore' })
})
after(async () => {
  for (const cleanup of cleanups.reverse()) await cleanup().catch(() => {})
  await rabbit.close()
})

/** Counts of a queue as the broker sees them (ready, unacknowledged). */
function queueCounts(queue: string): { ready: number; unacked: number } {
  const lines = execFileSync(
    'rabbitmqctl',
    ['-q', 'list_queues', 'name', 'messages_ready', 'messages_unacknowledged'],
    {
      encoding: 'utf8',
    },
  ).split('\n')
  const row = lines.map((line) => line.trim().split(/\s+/)).find((cells) => cells[0] === queue)
  return { ready: Number(row?.[1] ?? Number.NaN), unacked: Number(row?.[2] ?? Number.NaN) }
}

async function setup(env: Record<string, string> = {}) {
  const id = crypto.randomUUID().slice(0, 8)
  const names = { exchange: `test.notifications.${id}`, queue: `test.email.${id}` }
  const sink = await recordingSink()
  cleanups.push(() => sink.close())
  const bridge = await startBridge({
    RABBITMQ_URL: URL,
    RABBITMQ_EXCHANGE: names.exchange,
    RABBITMQ_QUEUE: names.queue,
    RABBITMQ_DECLARE: 'true',
    SINK_URL: sink.url,
    ...env,
  })
  cleanups.push(() => bridge.stop())
  cleanups.push(() =>
    rabbit.queueDelete({ queue: names.queue }).then(() => rabbit.exchangeDelete({ exchange: names.exchange })),
  )
  await bridge.ready()
  await waitFor(
    async () => ((await fetch(`http://127.0.0.1:${bridge.port}/readyz`)).ok ? true : undefined),
    'the consumer',
  )
  const publisher = rabbit.createPublisher({ confirm: true })
  cleanups.push(() => publisher.close())
  const publish = async (count: number, size = 0) => {
    const ids: string[] = []
    for (let index = 0; index < count; index += 1) {
      const messageId = crypto.randomUUID()
      ids.push(messageId)
      await publisher.send(
        {
          exchange: names.exchange,
          routingKey: KEYS[index % 2] as string,
          messageId,
          durable: true,
          headers: { traceparent: `00-${messageId.replaceAll('-', '')}-0000000000000001-01` },
        },
        Buffer.from(JSON.stringify({ envelope: { eventId: messageId }, padding: 'x'.repeat(size) })),
      )
    }
    return ids
  }
  return { names, sink, bridge, publish }
}

test('1,000 messages over both routing keys are each forwarded once; the queue ends empty with nothing unacked', async () => {
  const { names, sink, publish } = await setup()
  const ids = await publish(1000)
  await waitFor(() => (new Set(sink.ids()).size === 1000 ? true : undefined), 'all messages')
  assert.equal(sink.ids().length, 1000, 'a message was forwarded twice')
  assert.deepEqual(new Set(sink.ids()), new Set(ids))
  const first = sink.accepted[0]
  assert.equal(first?.source, 'rabbitmq')
  assert.match(
    first?.origin ?? '',
    new RegExp(
      `^rabbitmq:${names.exchange.replaceAll('.', '\\.')}/notifications\\.email\\.(response|invitation)\\.created$`,
    ),
  )
  assert.match(first?.headers.traceparent ?? '', /^00-/)
  await waitFor(() => {
    const counts = queueCounts(names.queue)
    return counts.ready === 0 && counts.unacked === 0 ? true : undefined
  }, 'an empty queue')
})

test('sink down: nothing is acked; after it recovers everything arrives', async () => {
  const { names, sink, publish } = await setup()
  sink.setMode('fail503')
  const ids = await publish(50)
  await waitFor(
    () => (sink.requests.filter((request) => request.status === 503).length >= 3 ? true : undefined),
    '503 answers',
    60_000,
  )
  const held = queueCounts(names.queue)
  assert.equal(held.ready + held.unacked, 50)
  assert.equal(sink.accepted.length, 0)
  sink.setMode('accept')
  await waitFor(() => (new Set(sink.ids()).size === 50 ? true : undefined), 'all messages after recovery', 60_000)
  assert.deepEqual(new Set(sink.ids()), new Set(ids))
  await waitFor(
    () => (queueCounts(names.queue).unacked === 0 && queueCounts(names.queue).ready === 0 ? true : undefined),
    'an empty queue',
  )
})

test('all RabbitMQ connections force-closed mid-stream: the bridge reconnects and nothing is lost', async () => {
  const { names, sink, publish } = await setup()
  const first = await publish(300)
  await waitFor(() => (sink.accepted.length > 0 ? true : undefined), 'the stream to start')
  // Every connection of the bridge (the test's own publisher keeps its connection).
  const connections = execFileSync('rabbitmqctl', ['-q', 'list_connections', 'pid', 'client_properties'], {
    encoding: 'utf8',
  })
    .split('\n')
    .filter((line) => line.includes('notify-edge-bridge'))
    .map((line) => line.trim().split(/\s+/))
  assert.ok(connections.length >= 1)
  for (const [pid] of connections)
    execFileSync('rabbitmqctl', ['-q', 'close_connection', pid as string, 'closed by the notify-edge test'])
  const second = await publish(300)
  await waitFor(() => (new Set(sink.ids()).size === 600 ? true : undefined), 'every message', 60_000)
  assert.deepEqual(new Set(sink.ids()), new Set([...first, ...second]))
  await waitFor(
    () => (queueCounts(names.queue).ready === 0 && queueCounts(names.queue).unacked === 0 ? true : undefined),
    'an empty queue',
  )
})

test('a message too large for a queue message sends its marker and is rejected into email.notifications.dlq', async () => {
  const { sink, publish } = await setup()
  await rabbit.queuePurge({ queue: 'email.notifications.dlq' }).catch(() => {})
  const [id] = await publish(1, INBOUND_EVENT_MAX_BYTES)
  await waitFor(() => (sink.accepted.some((event) => event.sourceMessageId === id) ? true : undefined), 'the marker')
  const marker = JSON.parse(sink.accepted.find((event) => event.sourceMessageId === id)?.body ?? '{}')
  assert.equal(marker.notifyEdgeMarker, 'payload-too-large')
  const dead = await waitFor(async () => {
    const message = await rabbit.basicGet({ queue: 'email.notifications.dlq', noAck: true })
    return message ?? undefined
  }, 'the dead-lettered original')
  assert.equal(dead.messageId, id)
})

/** Sets the broker's consumer_timeout; it applies to channels opened afterwards. */
function setConsumerTimeout(ms: number): void {
  execFileSync('rabbitmqctl', ['-q', 'eval', `application:set_env(rabbit, consumer_timeout, ${ms}).`], {
    stdio: 'ignore',
  })
}
// Whatever happens in the test, the broker gets its default back.
after(() => setConsumerTimeout(1_800_000))

/** The bridge's log lines (pino JSON), parsed. */
function logLines(output: string): { level: string; msg: string; [key: string]: unknown }[] {
  return output
    .split('\n')
    .filter((line) => line.startsWith('{'))
    .map((line) => JSON.parse(line))
}

test('a Worker outage longer than consumer_timeout: the broker closes the channel and requeues, the bridge says so once, every message arrives, the queue ends empty and new messages still flow', async (t) => {
  // 15 s for the bridge's consumer channel only: it is read when a channel opens, so the default is back at once.
  let context: Awaited<ReturnType<typeof setup>>
  setConsumerTimeout(15_000)
  try {
    context = await setup()
  } finally {
    setConsumerTimeout(1_800_000)
  }
  const { names, sink, bridge, publish } = context
  sink.setMode('fail503')
  const ids = await publish(50)
  await waitFor(
    () => (sink.requests.some((request) => request.status === 503) ? true : undefined),
    'the sink refusing the held messages',
  )
  // The broker checks on its channel tick (about a minute): the channel is closed, its unacked messages requeued
  // and the queue left without a consumer. (Asked over AMQP: rabbitmqctl is too heavy to poll for a minute.)
  await waitFor(
    async () => {
      const { messageCount, consumerCount } = await rabbit.queueDeclare({ queue: names.queue, passive: true })
      return messageCount === 50 && consumerCount === 0 ? true : undefined
    },
    'the broker to time the deliveries out and requeue them',
    150_000,
  )
  assert.equal(sink.accepted.length, 0)

  sink.setMode('accept')
  await waitFor(() => (new Set(sink.ids()).size === 50 ? true : undefined), 'every message after the outage', 60_000)
  assert.deepEqual(new Set(sink.ids()), new Set(ids))
  await waitFor(() => {
    const counts = queueCounts(names.queue)
    return counts.ready === 0 && counts.unacked === 0 ? true : undefined
  }, 'an empty queue with nothing unacked')
  // Held by the sink when their channel closed, accepted after: their redeliveries are not forwarded again.
  const duplicates = sink.ids().length - 50
  t.diagnostic(`forwarded twice after the timeout: ${duplicates} of 50`)
  assert.equal(duplicates, 0)

  // Still consuming: new messages arrive and are acked.
  const later = await publish(10)
  await waitFor(() => (later.every((id) => sink.ids().includes(id)) ? true : undefined), 'messages published after')
  await waitFor(() => {
    const counts = queueCounts(names.queue)
    return counts.ready === 0 && counts.unacked === 0 ? true : undefined
  }, 'an empty queue again')
  assert.equal(bridge.child.exitCode, null, 'the bridge exited')
  assert.equal(bridge.child.signalCode, null, 'the bridge was killed')

  assert.match(await bridge.metrics(), /bridge_rabbitmq_ack_timeouts_total 1\n/)
  const lines = logLines(bridge.output())
  const timeouts = lines.filter((line) => line.msg === 'rabbitmq.consumer-timeout')
  assert.equal(timeouts.length, 1, `one clear report of the timeout:\n${bridge.output()}`)
  assert.equal(timeouts[0]?.level, 'error')
  // No line per delivery: the stale acknowledgements of the closed channel are summed up, not repeated.
  const perDelivery = lines.filter((line) => JSON.stringify(line).includes('failed to ack/nack'))
  assert.equal(perDelivery.length, 0, `${perDelivery.length} lines about failed acks`)
  const settled = lines.filter((line) => line.staleAcks !== undefined)
  assert.deepEqual(
    settled.map((line) => [line.staleAcks, line.awaitingRedelivery]),
    [[50, 50]],
  )
  assert.deepEqual(
    lines.filter((line) => line.skipped !== undefined).map((line) => line.skipped),
    [50],
  )
})

// Nothing the child processes of this file printed may carry personal data.
after(() => assertNoLeaks())
