/** `npm run bench`: the Kafka relay. */
import { type Consumer, Kafka, logLevel, Partitioners } from 'kafkajs'
import { startBridge } from '../support/bridge-process.ts'
import { recordingSink } from '../support/recording-sink.ts'
import { waitFor } from '../support/wait.ts'
import { N, progress, rate, ratio, relayRate, results } from './lib.ts'

/**
 * The simplest forwarder that keeps the guarantee: one partition at a time,
 * its records 100 a POST, one request in flight, and the offset after each
 * hundred committed only once the sink answered. `started` resolves at its
 * first batch (the group join is not part of the rate).
 */
async function naiveForwarder(
  kafka: Kafka,
  topic: string,
  groupId: string,
  sinkUrl: string,
): Promise<{ consumer: Consumer; started: Promise<number> }> {
  const consumer = kafka.consumer({ groupId })
  await consumer.connect()
  await consumer.subscribe({ topic, fromBeginning: true })
  const { promise: started, resolve } = Promise.withResolvers<number>()
  await consumer.run({
    autoCommit: false,
    eachBatchAutoResolve: false,
    eachBatch: async ({ batch, resolveOffset }) => {
      resolve(performance.now())
      for (let from = 0; from < batch.messages.length; from += 100) {
        const chunk = batch.messages.slice(from, from + 100)
        const events = chunk.map((message) => ({
          source: 'kafka',
          origin: `kafka:${batch.topic}/${batch.partition}@${message.offset}`,
          sourceMessageId: message.headers?.['message-id']?.toString() ?? `${batch.partition}:${message.offset}`,
          receivedAt: new Date().toISOString(),
          headers: Object.fromEntries(
            Object.entries(message.headers ?? {}).map(([name, value]) => [name, value?.toString() ?? '']),
          ),
          body: message.value?.toString('utf8') ?? '',
        }))
        const response = await fetch(sinkUrl, {
          method: 'POST',
          headers: { 'content-type': 'application/json' },
          body: JSON.stringify({ events }),
        })
        await response.text()
        const last = chunk.at(-1)?.offset as string
        resolveOffset(last)
        await consumer.commitOffsets([
          { topic: batch.topic, partition: batch.partition, offset: (BigInt(last) + 1n).toString() },
        ])
      }
    },
  })
  return { consumer, started }
}

/** The Kafka relay beside a consume-and-commit loop and a naive forwarder, over the same topic. */
export async function benchKafka() {
  const kafka = new Kafka({ clientId: 'notify-edge-bench', brokers: ['127.0.0.1:9092'], logLevel: logLevel.NOTHING })
  const admin = kafka.admin()
  await admin.connect()
  const topic = `bench.pin.${crypto.randomUUID().slice(0, 8)}`
  const sink = await recordingSink()
  try {
    await admin.createTopics({ topics: [{ topic, numPartitions: 3 }], waitForLeaders: true })
    progress(`kafka_relay: producing ${N.kafka} records`)
    const producer = kafka.producer({ createPartitioner: Partitioners.DefaultPartitioner })
    await producer.connect()
    const value = JSON.stringify({ PersonId: crypto.randomUUID(), UserId: crypto.randomUUID() })
    for (let sent = 0; sent < N.kafka; sent += 1000) {
      await producer.send({
        topic,
        messages: Array.from({ length: Math.min(1000, N.kafka - sent) }, (_, index) => ({
          key: String((sent + index) % 97),
          value,
          headers: { 'message-id': crypto.randomUUID(), 'event-type': 'person-upserted' },
        })),
      })
    }
    await producer.disconnect()
    const committedToEnd = async (group: string) => {
      const [ends, [committed]] = await Promise.all([
        admin.fetchTopicOffsets(topic),
        admin.fetchOffsets({ groupId: group, topics: [topic] }),
      ])
      return ends.every((end) => committed?.partitions.find((p) => p.partition === end.partition)?.offset === end.high)
    }

    progress('kafka_relay: consume-and-commit only')
    const group = `bench-consume-${crypto.randomUUID().slice(0, 8)}`
    const consumer = kafka.consumer({ groupId: group })
    await consumer.connect()
    await consumer.subscribe({ topic, fromBeginning: true })
    let start = 0
    await consumer.run({
      autoCommit: false,
      eachBatchAutoResolve: false,
      partitionsConsumedConcurrently: 3,
      eachBatch: async ({ batch, resolveOffset }) => {
        if (start === 0) start = performance.now()
        const last = batch.messages.at(-1)
        if (!last) return
        resolveOffset(last.offset)
        await consumer.commitOffsets([
          { topic: batch.topic, partition: batch.partition, offset: (BigInt(last.offset) + 1n).toString() },
        ])
      },
    })
    await waitFor(async () => ((await committedToEnd(group)) ? true : undefined), 'consume-only', 600_000)
    const consumeOnly = rate(N.kafka, performance.now() - start)
    await consumer.disconnect()

    progress('kafka_relay: a naive forwarder (100 a POST, one in flight, then commit)')
    const naiveGroup = `bench-naive-${crypto.randomUUID().slice(0, 8)}`
    const naiveStart = await naiveForwarder(kafka, topic, naiveGroup, sink.url)
    await waitFor(async () => ((await committedToEnd(naiveGroup)) ? true : undefined), 'the naive forwarder', 600_000)
    const naive = rate(N.kafka, performance.now() - (await naiveStart.started))
    await naiveStart.consumer.disconnect()
    sink.accepted.length = 0

    progress('kafka_relay: the bridge')
    const bridgeGroup = `bench-bridge-${crypto.randomUUID().slice(0, 8)}`
    const relay = await startBridge({
      KAFKA_BROKERS: '127.0.0.1:9092',
      KAFKA_TOPICS: topic,
      KAFKA_GROUP_ID: bridgeGroup,
      SINK_URL: sink.url,
      LOG_LEVEL: 'warn',
    })
    const bridge = await relayRate('kafka', relay, sink, N.kafka, () => committedToEnd(bridgeGroup))
    await relay.stop()
    results.kafka_relay = {
      msgs_per_s: bridge,
      consume_only_msgs_per_s: consumeOnly,
      naive_forwarder_msgs_per_s: naive,
      of_naive_forwarder: ratio('kafka_relay / naive forwarder', bridge, naive, 100),
      records: N.kafka,
    }
  } finally {
    await admin.deleteTopics({ topics: [topic] }).catch(() => {})
    await admin.disconnect()
    await sink.close()
  }
}
