import { Counter, Gauge, Histogram, Registry } from 'prom-client'

/** The bridge's Prometheus metrics, in a registry of their own. */
export function createMetrics() {
  const registry = new Registry()
  return {
    registry,
    forwarded: new Counter({
      name: 'bridge_events_forwarded_total',
      help: 'Events the Worker accepted (202), by source.',
      labelNames: ['source'],
      registers: [registry],
    }),
    latency: new Histogram({
      name: 'bridge_forward_latency_seconds',
      help: 'From an event handed to the sink to the Worker accepting it.',
      labelNames: ['source'],
      buckets: [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60],
      registers: [registry],
    }),
    sinkErrors: new Counter({
      name: 'bridge_sink_errors_total',
      help: 'Failed sink requests, by HTTP status (or network / timeout).',
      labelNames: ['status'],
      registers: [registry],
    }),
    markers: new Counter({
      name: 'bridge_markers_total',
      help: 'Events replaced by a marker (payload-too-large, rejected-by-ingest).',
      labelNames: ['marker'],
      registers: [registry],
    }),
    untransferred: new Gauge({
      name: 'bridge_outbox_untransferred_rows',
      help: 'Outbox rows not transferred yet (at the last sweep).',
      registers: [registry],
    }),
    rabbitmqAckTimeouts: new Counter({
      name: 'bridge_rabbitmq_ack_timeouts_total',
      help: 'Consumer channels RabbitMQ closed because deliveries waiting for the Worker outlived its consumer_timeout.',
      registers: [registry],
    }),
    sourceUp: new Gauge({
      name: 'bridge_source_up',
      help: '1 when the source is connected, 0 when not.',
      labelNames: ['source'],
      registers: [registry],
    }),
  }
}

/** The bridge's metrics. */
export type Metrics = ReturnType<typeof createMetrics>
