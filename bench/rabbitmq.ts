/** `npm run bench`: the RabbitMQ relay. */
import { type AsyncMessage, Connection, type Connection as RabbitConnection } from 'rabbitmq-client'
import { startBridge } from '../support/bridge-process.ts'
import { recordingSink } from '../support/recording-sink.ts'
import { waitFor } from '../support/wait.ts'
import { N, progress, rate, ratio, relayRate, results } from './lib.ts'

/**
 * The simplest forwarder that keeps the guarantee: consume with a prefetch of
 * 200, POST what arrived 100 at a time, one request in flight, and ack those
 * (one multiple ack) only after the sink answered.
 */
async function naiveForwarder(rabbit: RabbitConnection, queue: string, sinkUrl: string, total: number) {
  const channel = await rabbit.acquire()
  await channel.basicQos({ prefetchCount: 200 })
  const buffer: AsyncMessage[] = []
  let forwarded = 0
  let busy = false
  const { promise: done, resolve: finished, reject: failed } = Promise.withResolvers<void>()
  const drain = async () => {
    if (busy) return
    busy = true
    while (buffer.length >= 100 || (buffer.length > 0 && forwarded + buffer.length >= total)) {
      const batch = buffer.splice(0, 100)
      const events = batch.map((message) => ({
        source: 'rabbitmq',
        origin: `rabbitmq:${queue}`,
        sourceMessageId: message.messageId,
        receivedAt: new Date().toISOString(),
        headers: {},
        body: Buffer.isBuffer(message.body) ? message.body.toString('utf8') : JSON.stringify(message.body),
      }))
      const response = await fetch(sinkUrl, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ events }),
      })
      await response.text()
      channel.basicAck({ deliveryTag: (batch.at(-1) as AsyncMessage).deliveryTag, multiple: true })
      forwarded += batch.length
    }
    busy = false
    if (forwarded >= total) finished()
  }
  const { consumerTag } = await channel.basicConsume({ queue }, (message) => {
    buffer.push(message)
    drain().catch(failed)
  })
  await done
  await channel.basicCancel(consumerTag)
  await channel.close()
}

/** The RabbitMQ relay beside a consume-and-ack loop and a naive forwarder, over the same queue. */
export async function benchRabbit() {
  const url = 'amqp://guest:guest@127.0.0.1:5672'
  const rabbit = new Connection({ url, connectionName: 'notify-edge-bench' })
  const id = crypto.randomUUID().slice(0, 8)
  const exchange = `bench.notifications.${id}`
  const queue = `bench.email.${id}`
  const sink = await recordingSink()
  const preload = async () => {
    await rabbit.exchangeDeclare({ exchange, type: 'topic', durable: true })
    await rabbit.queueDeclare({
      queue,
      durable: true,
      arguments: {
        'x-dead-letter-exchange': 'email.notifications.dlx',
        'x-dead-letter-routing-key': 'email.notifications.dlq',
      },
    })
    await rabbit.queueBind({ queue, exchange, routingKey: 'notifications.email.response.created' })
    const publisher = rabbit.createPublisher({ confirm: true, maxAttempts: 3 })
    const body = Buffer.from(JSON.stringify({ envelope: { eventType: 'response.created' }, data: {} }))
    for (let sent = 0; sent < N.rabbit; sent += 500) {
      await Promise.all(
        Array.from({ length: Math.min(500, N.rabbit - sent) }, () =>
          publisher.send(
            {
              exchange,
              routingKey: 'notifications.email.response.created',
              messageId: crypto.randomUUID(),
              durable: true,
            },
            body,
          ),
        ),
      )
    }
    await publisher.close()
  }
  const depth = async () => (await rabbit.queueDeclare({ queue, passive: true })).messageCount
  try {
    progress(`rabbitmq_relay: consume-and-ack only over ${N.rabbit} messages`)
    await preload()
    let consumed = 0
    let start = performance.now()
    const consumer = rabbit.createConsumer(
      { queue, queueOptions: { passive: true }, qos: { prefetchCount: 200 }, concurrency: 200 },
      () => {
        consumed += 1
      },
    )
    await waitFor(() => (consumed >= N.rabbit ? true : undefined), 'consume-only', 600_000)
    const consumeOnly = rate(N.rabbit, performance.now() - start)
    await consumer.close()

    progress(`rabbitmq_relay: a naive forwarder (100 a POST, one in flight, then ack) over ${N.rabbit} messages`)
    await preload()
    start = performance.now()
    await naiveForwarder(rabbit, queue, sink.url, N.rabbit)
    const naive = rate(N.rabbit, performance.now() - start)
    sink.accepted.length = 0

    progress(`rabbitmq_relay: the bridge over ${N.rabbit} messages`)
    await preload()
    const relay = await startBridge({
      RABBITMQ_URL: url,
      RABBITMQ_QUEUE: queue,
      RABBITMQ_PREFETCH: '200',
      SINK_URL: sink.url,
      LOG_LEVEL: 'warn',
    })
    const bridge = await relayRate('rabbitmq', relay, sink, N.rabbit, () => sink.accepted.length >= N.rabbit)
    await relay.stop()
    progress(`rabbitmq_relay: queue depth after the run ${await depth()}`)
    results.rabbitmq_relay = {
      msgs_per_s: bridge,
      consume_only_msgs_per_s: consumeOnly,
      naive_forwarder_msgs_per_s: naive,
      of_consume_only: ratio('rabbitmq_relay / consume-only', bridge, consumeOnly, 75),
      of_naive_forwarder: ratio('rabbitmq_relay / naive forwarder', bridge, naive, 100),
      messages: N.rabbit,
    }
  } finally {
    await rabbit.queueDelete({ queue }).catch(() => {})
    await rabbit.exchangeDelete({ exchange }).catch(() => {})
    await rabbit.close()
    await sink.close()
  }
}
