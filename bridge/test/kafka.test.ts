/** The Kafka source against a real single-node Apache Kafka 4.x broker (started by services:up). */
import assert from 'node:assert/strict'
import { execFileSync } from 'node:child_process'
import { after, before, test } from 'node:test'
import type { InboundEvent } from '@notify-edge/contracts'
import { type Admin, Kafka, logLevel, PartitionAssigners, Partitioners, type Producer } from 'kafkajs'
import { startBridge } from '../../support/bridge-process.ts'
import { assertNoLeaks } from '../../support/child-output.ts'
import { recordingSink } from '../../support/recording-sink.ts'
import { waitFor } from '../../support/wait.ts'

const BROKERS = process.env.TEST_KAFKA_BROKERS ?? '127.0.0.1:9092'
const kafka = new Kafka({ clientId: 'notify-edge-test', brokers: BROKERS.split(','), logLevel: logLevel.NOTHING })
let admin: Admin
let producer: Producer
const cleanups: (() => Promise<unknown>)[] = []

before(async () => {
  execFileSync('bash', ['scripts/services-up.sh'], { stdio: 'ignore' })
  admin = kafka.admin()
  await admin.connect()
  producer = kafka.producer({ createPartitioner: Partitioners.DefaultPartitioner })
  await producer.connect()
})
after(async () => {
  for (const cleanup of cleanups.reverse()) await cleanup().catch(() => {})
  await producer.disconnect()
  await admin.disconnect()
})

async function topicAndGroup() {
  const id = crypto.randomUUID().slice(0, 8)
  const topic = `test.pin.profile.${id}`
  await admin.createTopics({ topics: [{ topic, numPartitions: 3 }], waitForLeaders: true })
  cleanups.push(() => admin.deleteTopics({ topics: [topic] }))
  return { topic, group: `test-group-${id}` }
}

async function produce(topic: string, count: number) {
  const ids: string[] = []
  for (let start = 0; start < count; start += 200) {
    const messages = Array.from({ length: Math.min(200, count - start) }, (_, index) => {
      const id = crypto.randomUUID()
      ids.push(id)
      return {
        key: `aggregate-${(start + index) % 7}`,
        value: JSON.stringify({ n: start + index }),
        headers: { 'message-id': id, 'event-type': 'person-upserted', 'contract-version': '1' },
      }
    })
    await producer.send({ topic, messages })
  }
  return ids
}

async function bridge(topic: string, group: string, sinkUrl: string) {
  const started = await startBridge({
    KAFKA_BROKERS: BROKERS,
    KAFKA_TOPICS: topic,
    KAFKA_GROUP_ID: group,
    SINK_URL: sinkUrl,
  })
  cleanups.push(() => started.stop())
  await started.ready()
  return started
}

/** Committed offset of each partition equals its end. */
async function committedToEnd(topic: string, group: string): Promise<boolean> {
  const [ends, [committed]] = await Promise.all([
    admin.fetchTopicOffsets(topic),
    admin.fetchOffsets({ groupId: group, topics: [topic] }),
  ])
  return ends.every((end) => committed?.partitions.find((p) => p.partition === end.partition)?.offset === end.high)
}

/** Waits until the group's committed offsets reach the end of every partition. */
async function untilCommittedToEnd(topic: string, group: string): Promise<void> {
  await waitFor(
    async () => ((await committedToEnd(topic, group)) ? true : undefined),
    'offsets committed to the end',
    90_000,
  )
}

/** No partition has a committed offset (nothing was accepted yet). */
async function assertNothingCommitted(topic: string, group: string): Promise<void> {
  const [committed] = await admin.fetchOffsets({ groupId: group, topics: [topic] })
  assert.ok(
    committed?.partitions.every((partition) => partition.offset === '-1'),
    `nothing may be committed before the sink accepts: ${JSON.stringify(committed)}`,
  )
}

function position(event: InboundEvent): { partition: number; offset: number } {
  const match = /\/(\d+)@(\d+)$/.exec(event.origin)
  return { partition: Number(match?.[1]), offset: Number(match?.[2]) }
}

test('1,000 records over 3 partitions: forwarded in order per partition; SIGKILL mid-stream and a restart deliver every record, offsets committed to the end', async () => {
  const { topic, group } = await topicAndGroup()
  const sink = await recordingSink()
  cleanups.push(() => sink.close())
  const first = await bridge(topic, group, sink.url)
  const ids = await produce(topic, 1000)
  await waitFor(() => (sink.accepted.length >= 200 ? true : undefined), 'part of the stream', 60_000)
  await first.kill()
  const delivered = sink.accepted.length
  await bridge(topic, group, sink.url)
  await untilCommittedToEnd(topic, group)
  assert.deepEqual(new Set(sink.ids()), new Set(ids))
  const event = sink.accepted[0]
  assert.equal(event?.source, 'kafka')
  assert.equal(event?.headers['event-type'], 'person-upserted')
  assert.match(event?.headers['kafka-key'] ?? '', /^aggregate-\d$/)
  // Per partition, offsets arrive in order (a redelivery after the kill starts over from the last commit).
  const last = new Map<number, number>()
  for (const accepted of sink.accepted) {
    const { partition, offset } = position(accepted)
    const previous = last.get(partition)
    if (previous !== undefined && offset <= previous) {
      // Only a restart may go back, and only to offsets delivered before the kill.
      assert.ok(
        sink.accepted.indexOf(accepted) >= delivered,
        `partition ${partition} went back from ${previous} to ${offset}`,
      )
    }
    last.set(partition, offset)
  }
  assert.equal(new Set(sink.accepted.map((e) => position(e).partition)).size, 3)
})

test('sink down: nothing committed; after it recovers everything arrives and is committed', async () => {
  const { topic, group } = await topicAndGroup()
  const sink = await recordingSink()
  cleanups.push(() => sink.close())
  sink.setMode('fail503')
  await bridge(topic, group, sink.url)
  const ids = await produce(topic, 60)
  await waitFor(
    () => (sink.requests.filter((request) => request.status === 503).length >= 3 ? true : undefined),
    '503 answers',
    60_000,
  )
  await assertNothingCommitted(topic, group)
  sink.setMode('accept')
  await untilCommittedToEnd(topic, group)
  assert.deepEqual(new Set(sink.ids()), new Set(ids))
})

test('a rebalance while the sink is down: the waiting batch ends without committing, the group settles at once, no crash; all arrive after', async () => {
  const { topic, group } = await topicAndGroup()
  const sink = await recordingSink()
  cleanups.push(() => sink.close())
  sink.setMode('fail503')
  const first = await bridge(topic, group, sink.url)
  const ids = await produce(topic, 60)
  await waitFor(
    () => (sink.requests.filter((request) => request.status === 503).length >= 2 ? true : undefined),
    'the first bridge waiting on the sink',
    60_000,
  )
  // A second member joins: the first must leave its waiting batch to rejoin. Stuck in it, the group
  // would wait out the 60 s rebalance timeout and then expel it.
  const second = await bridge(topic, group, sink.url)
  await waitFor(
    async () => {
      const { groups } = await admin.describeGroups([group])
      return groups[0]?.state === 'Stable' && groups[0]?.members.length === 2 ? true : undefined
    },
    'both members in a settled group',
    30_000,
  )
  await assertNothingCommitted(topic, group)
  sink.setMode('accept')
  await untilCommittedToEnd(topic, group)
  assert.deepEqual(new Set(sink.ids()), new Set(ids))
  for (const member of [first, second]) {
    assert.equal(member.child.exitCode, null)
    assert.doesNotMatch(member.output(), /"msg":"source\.crashed/)
  }
  assert.match(first.output(), /"msg":"kafka\.rebalance-ends-batch"/)
})

test('kafkajs gives up on the consumer (a member with another protocol holds the group): the bridge starts it again and delivers once it can join', async () => {
  const { topic, group } = await topicAndGroup()
  const sink = await recordingSink()
  cleanups.push(() => sink.close())
  // A member of another kind (a "range"-only client) on a topic of its own: the bridge's JoinGroup
  // is refused with INCONSISTENT_GROUP_PROTOCOL, which kafkajs does not retry.
  const { topic: other } = await topicAndGroup()
  const foreign = kafka.consumer({
    groupId: group,
    partitionAssigners: [(config) => ({ ...PartitionAssigners.roundRobin(config), name: 'range' })],
  })
  await foreign.connect()
  await foreign.subscribe({ topics: [other] })
  await foreign.run({ eachMessage: async () => {} })
  await waitFor(
    async () => ((await admin.describeGroups([group])).groups[0]?.state === 'Stable' ? true : undefined),
    'the foreign member in the group',
  )
  const started = await bridge(topic, group, sink.url)
  const ids = await produce(topic, 30)
  await waitFor(() => (/"msg":"source\.crashed/.test(started.output()) ? true : undefined), 'the crash')
  // The log says what kafkajs does: it does not restart after this error.
  assert.match(started.output(), /"msg":"source\.crashed-given-up"/)
  assert.equal(sink.accepted.length, 0)
  await foreign.disconnect()
  await untilCommittedToEnd(topic, group)
  assert.deepEqual(new Set(sink.ids()), new Set(ids))
})

test('two bridge processes in one group share the partitions and lose nothing', async () => {
  const { topic, group } = await topicAndGroup()
  const sink = await recordingSink()
  cleanups.push(() => sink.close())
  const one = await bridge(topic, group, sink.url)
  const two = await bridge(topic, group, sink.url)
  await waitFor(
    async () => {
      const { groups } = await admin.describeGroups([group])
      const members = groups[0]?.members ?? []
      return groups[0]?.state === 'Stable' && members.length === 2 ? true : undefined
    },
    'both members in the group',
    60_000,
  )
  const ids = await produce(topic, 600)
  await untilCommittedToEnd(topic, group)
  assert.deepEqual(new Set(sink.ids()), new Set(ids))
  const forwarded = async (bridgeProcess: typeof one) =>
    Number(/bridge_events_forwarded_total\{source="kafka"\} (\d+)/.exec(await bridgeProcess.metrics())?.[1] ?? 0)
  const [a, b] = [await forwarded(one), await forwarded(two)]
  assert.ok(a > 0 && b > 0, `both members must forward (got ${a} and ${b})`)
})

test('a topic that does not exist yet when the bridge starts: it keeps trying, and delivers once the topic exists', async () => {
  const topic = `test.pin.late.${crypto.randomUUID().slice(0, 8)}`
  const group = `test-group-late-${crypto.randomUUID().slice(0, 8)}`
  cleanups.push(() => admin.deleteTopics({ topics: [topic] }))
  const sink = await recordingSink()
  cleanups.push(() => sink.close())
  await bridge(topic, group, sink.url)
  const ids = await produce(topic, 20)
  await untilCommittedToEnd(topic, group)
  assert.deepEqual(new Set(sink.ids()), new Set(ids))
})

// Nothing the child processes of this file printed may carry personal data.
after(() => assertNoLeaks())
