// What the session record costs per forwarded agent event (R-REC-1). reportAgentEvents appends each
// batch to the event log (the sessionEvents stream) and, since the record, writes the same batch
// into SessionRecordMessage/SessionRecordPart in one statement before it. Measured on one server
// against real PostgreSQL, in alternating rounds on fresh sessions: the event-log append alone
// (baseline) against the append plus the record write, for the events of realistic turns (a user
// message, streamed text deltas, a bash tool call through pending/running/completed with 2 KiB of
// output, the answer) in the forwarder's batches of at most 100.
import { performance } from 'node:perf_hooks';
import { agentEventFrom } from '../resolvers/gateway/conversation';
import { createProject } from '../test/leases/helpers';
import { createTestRepo } from '../test/support/git';
import { startTestApp } from '../test/support/app';
import { type BenchResult, percentile, round, runIfMain } from './support/harness';

const TURNS_PER_ROUND = 20;
const ROUNDS = 6;
const BATCH = 100;

type Json = Record<string, unknown>;

/** The OpenCode events of one turn, as the daemon forwards them. */
function turnEvents(turn: number): Json[] {
  const user = `u${turn}`;
  const assistant = `a${turn}`;
  const message = (id: string, role: string, completed?: number) => ({
    type: 'message.updated',
    properties: {
      info: { id, role, sessionID: 'oc', time: { created: 1, ...(completed ? { completed } : {}) } },
    },
  });
  const part = (id: string, messageID: string, extra: Json) => ({
    type: 'message.part.updated',
    properties: { part: { id, messageID, sessionID: 'oc', ...extra } },
  });
  const words = Array.from({ length: 60 }, (_, i) => `word${i} `);
  const tool = (status: string, extra: Json = {}) =>
    part(`t${turn}`, assistant, {
      type: 'tool',
      tool: 'bash',
      callID: `c${turn}`,
      state: { status, input: { command: 'ls -la', description: 'List' }, ...extra },
    });
  return [
    message(user, 'user'),
    part(`p${turn}u`, user, { type: 'text', text: `Please do task ${turn}.` }),
    { type: 'session.status', properties: { sessionID: 'oc', status: { type: 'busy' } } },
    message(assistant, 'assistant'),
    tool('pending'),
    tool('running', { time: { start: 1 } }),
    tool('completed', { output: 'x'.repeat(2_048), title: 'ls', time: { start: 1, end: 2 } }),
    part(`p${turn}a`, assistant, { type: 'text', text: '', time: { start: 3 } }),
    ...words.map((delta) => ({
      type: 'message.part.delta',
      properties: { partID: `p${turn}a`, messageID: assistant, field: 'text', delta },
    })),
    part(`p${turn}a`, assistant, { type: 'text', text: words.join(''), time: { start: 3, end: 4 } }),
    message(assistant, 'assistant', 5),
    { type: 'session.idle', properties: { sessionID: 'oc' } },
  ];
}

async function run(): Promise<BenchResult[]> {
  const repo = createTestRepo({ 'README.md': '# bench\n' });
  const t = await startTestApp();
  try {
    const { pubsub, record } = t.app.services;
    const url = () => 'unused';

    /** One turn's batches as reportAgentEvents handles them; returns µs per event of each batch. */
    async function forward(sessionId: string, accountId: string, withRecord: boolean): Promise<number[]> {
      const perEvent: number[] = [];
      for (let turn = 0; turn < TURNS_PER_ROUND; turn++) {
        const events = turnEvents(turn);
        for (let i = 0; i < events.length; i += BATCH) {
          const raw = events.slice(i, i + BATCH);
          const mapped = raw.map((event) => agentEventFrom(event, url)).filter((e) => e !== null);
          const started = performance.now();
          // As reportAgentEvents does: the record first, then the event-log append.
          if (withRecord) await record.ingest(sessionId, raw, url);
          await Promise.all(
            mapped.map((event) =>
              pubsub.publish('sessionEvents', sessionId, { sessionId, accountId, event }),
            ),
          );
          perEvent.push(((performance.now() - started) * 1_000) / raw.length);
        }
      }
      return perEvent;
    }

    const db = t.app.services.db;
    await createProject(t, repo.url);
    const project = await db.project.findFirstOrThrow();
    const accountId = project.accountId;
    // Session rows only: the record and the event log need nothing else of a session.
    const sessions: string[] = [];
    for (let i = 0; i < ROUNDS * 2 + 1; i++) {
      const row = await db.session.create({
        data: {
          accountId,
          projectId: project.id,
          branchName: `bench-${i}`,
          baseRef: 'main',
          status: 'STOPPED',
        },
      });
      sessions.push(row.id);
    }
    // Warm-up: prepared statements and pools on both paths.
    await forward(sessions[0]!, accountId, true);
    await forward(sessions[0]!, accountId, false);
    const base: number[] = [];
    const ours: number[] = [];
    for (let round = 0; round < ROUNDS; round++) {
      const a = sessions[round * 2 + 1]!;
      const b = sessions[round * 2 + 2]!;
      if (round % 2 === 0) {
        base.push(...(await forward(a, accountId, false)));
        ours.push(...(await forward(b, accountId, true)));
      } else {
        ours.push(...(await forward(b, accountId, true)));
        base.push(...(await forward(a, accountId, false)));
      }
    }
    base.sort((x, y) => x - y);
    ours.sort((x, y) => x - y);
    const rows = await db.sessionRecordPart.count();
    const mean = (values: number[]) => values.reduce((n, v) => n + v, 0) / values.length;
    const eventsPerTurn = turnEvents(0).length;
    return [
      {
        name: 'µs per event, p50 of batches (append + record)',
        value: round(percentile(ours, 50), 1),
        unit: 'µs',
        baseline: round(percentile(base, 50), 1),
        note: `baseline: event-log append alone; ${eventsPerTurn} events per turn, batches ≤ ${BATCH}`,
      },
      {
        name: 'µs per event, mean (append + record)',
        value: round(mean(ours), 1),
        unit: 'µs',
        baseline: round(mean(base), 1),
      },
      {
        name: 'µs per event, p95 of batches (append + record)',
        value: round(percentile(ours, 95), 1),
        unit: 'µs',
        baseline: round(percentile(base, 95), 1),
      },
      {
        name: 'record parts stored',
        value: rows,
        unit: 'rows',
        note: `${ROUNDS + 1} sessions × ${TURNS_PER_ROUND} turns × 4`,
      },
    ];
  } finally {
    await t.stop();
    repo.remove();
  }
}

export { run };
runIfMain(import.meta.url, run);
