// Prometheus metrics (GET /metrics): request and GraphQL operation durations, WebSocket
// connections, open subscriptions by field, pub/sub lag, job queue depth and failures, sessions by
// status, admission refusals, faults.
// Gauges that need a query are read at scrape time; a failing read leaves the gauge unset rather
// than failing the scrape.
import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics } from 'prom-client';
import type { DocumentNode, OperationDefinitionNode } from 'graphql';
import type { Plugin } from 'graphql-yoga';
import type { Services } from '../resolvers/services';

export type Metrics = ReturnType<typeof createMetrics>;

export function createMetrics() {
  const registry = new Registry();
  /** Subscription fields seen so far on this process. */
  const known = new Set<string>();
  collectDefaultMetrics({ register: registry, prefix: 'singulacomp_process_' });
  const httpDuration = new Histogram({
    name: 'singulacomp_http_request_duration_seconds',
    help: 'HTTP request duration by path kind and status.',
    labelNames: ['route', 'status'] as const,
    buckets: [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30],
    registers: [registry],
  });
  const operationDuration = new Histogram({
    name: 'singulacomp_graphql_operation_duration_seconds',
    help: 'GraphQL execution time by operation type and root field.',
    labelNames: ['type', 'field'] as const,
    buckets: [0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10],
    registers: [registry],
  });
  const admissionRefusals = new Counter({
    name: 'singulacomp_admission_refusals_total',
    help: 'createSession calls refused by the concurrent-session limit.',
    registers: [registry],
  });
  const graphqlFastPath = new Counter({
    name: 'singulacomp_graphql_fast_path_total',
    help: 'POST /graphql requests the fast path read: answered itself, or handed to yoga.',
    labelNames: ['outcome'] as const,
    registers: [registry],
  });
  const faults = new Counter({
    name: 'singulacomp_request_faults_total',
    help: 'Requests answered SERVICE_UNAVAILABLE (unavailable) or masked as INTERNAL_SERVER_ERROR (unexpected).',
    labelNames: ['kind'] as const,
    registers: [registry],
  });
  const jobFailures = new Counter({
    name: 'singulacomp_job_failures_total',
    help: 'Job attempts that threw (each is retried while attempts remain).',
    labelNames: ['queue'] as const,
    registers: [registry],
  });

  const pubsubLag = new Histogram({
    name: 'singulacomp_pubsub_lag_seconds',
    help: 'Time from an event being broadcast to its arrival through the pub/sub transport on this process, by topic (publisher clock against ours).',
    labelNames: ['topic'] as const,
    buckets: [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5],
    registers: [registry],
  });

  /**
   * Starts timing one GraphQL execution of `document`; the returned function records it. The
   * GraphQL fast path (server/fast-paths/graphql-fast-path.ts) times its executions with it too.
   */
  const startOperation = (document: DocumentNode): (() => void) => {
    const started = process.hrtime.bigint();
    const operation = document.definitions.find(
      (d): d is OperationDefinitionNode => d.kind === 'OperationDefinition',
    );
    const type = operation?.operation ?? 'unknown';
    const first = operation?.selectionSet.selections[0];
    const field = first?.kind === 'Field' ? first.name.value : 'unknown';
    return () => operationDuration.observe({ type, field }, Number(process.hrtime.bigint() - started) / 1e9);
  };

  return {
    registry,
    httpDuration,
    pubsubLag,
    admissionRefusals,
    graphqlFastPath,
    faults,
    jobFailures,

    /** Scrape-time gauges that read the services (database, job queue, WebSocket server). */
    bind(
      services: Services,
      connections: () => number,
      subscriptions: () => Map<string, number> = () => new Map(),
    ): void {
      new Gauge({
        name: 'singulacomp_graphql_subscriptions',
        help: 'Open GraphQL subscriptions on this process by subscription field.',
        labelNames: ['field'] as const,
        registers: [registry],
        collect() {
          // Fields whose last subscription ended read 0 rather than vanish.
          const counts = subscriptions();
          for (const field of known) if (!counts.has(field)) this.set({ field }, 0);
          for (const [field, n] of counts) {
            known.add(field);
            this.set({ field }, n);
          }
        },
      });
      new Gauge({
        name: 'singulacomp_websocket_connections',
        help: 'Open graphql-ws connections on this process.',
        registers: [registry],
        collect() {
          this.set(connections());
        },
      });
      new Gauge({
        name: 'singulacomp_sessions',
        help: 'Sessions by status (whole fleet).',
        labelNames: ['status'] as const,
        registers: [registry],
        async collect() {
          const rows = await services.db.session
            .groupBy({ by: ['status'], _count: { _all: true } })
            .catch(() => []);
          this.reset();
          for (const row of rows) this.set({ status: row.status }, row._count._all);
        },
      });
      new Gauge({
        name: 'singulacomp_job_queue_depth',
        help: 'Jobs per queue and state (queued, active, failed).',
        labelNames: ['queue', 'state'] as const,
        registers: [registry],
        async collect() {
          const depth = await services.jobs.depth().catch(() => null);
          if (!depth) return;
          for (const [queue, counts] of Object.entries(depth)) {
            for (const [state, n] of Object.entries(counts)) this.set({ queue, state }, n);
          }
        },
      });
      new Gauge({
        name: 'singulacomp_pubsub_healthy',
        help: '1 while the pub/sub transport (Redis) is reachable.',
        registers: [registry],
        collect() {
          this.set(services.pubsub.healthy() ? 1 : 0);
        },
      });
    },

    startOperation,

    /** Times each GraphQL execution (queries, mutations; subscriptions: until the stream starts). */
    plugin(): Plugin {
      return {
        onExecute: ({ args }) => {
          const done = startOperation(args.document as DocumentNode);
          return { onExecuteDone: done };
        },
      };
    },
  };
}
