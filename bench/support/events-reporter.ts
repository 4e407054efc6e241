// The daemon's side of bench/session-events.ts in a process of its own: the reportAgentEvents
// POSTs, in batches, with the sandbox's token. In the bench's process this HTTP client shared one
// event loop with the server under test, and about a quarter of the server's CPU per batch was the
// client's own (building, sending and reading the requests); a real daemon is another process.
//
// Forked with the GraphQL URL, the sandbox token and the session id. Messages: given
// {run: {from, count, batch}} it posts the deltas from..from+count-1 in batches of `batch`, one
// request in flight as the daemon's forwarder has, and answers {done: {startedAt}} (the wall-clock
// ms, performance.timeOrigin-based, at which the first POST began) or {failed}.
import { performance } from 'node:perf_hooks';
import { deltaEvent } from './opencode-events';

export interface ReportRun {
  from: number;
  count: number;
  batch: number;
}

export type ReporterMessage = { done: { startedAt: number } } | { failed: string };

const [url, token, sessionId] = process.argv.slice(2);
if (!url || !token || !sessionId || !process.send) {
  console.error('usage: fork(events-reporter.ts, [graphqlUrl, sandboxToken, sessionId])');
  process.exit(2);
}
const send = (message: ReporterMessage) => process.send!(message);

const MUTATION =
  'mutation($input: ReportAgentEventsInput!) { reportAgentEvents(input: $input) { __typename } }';

async function report(run: ReportRun): Promise<number> {
  const startedAt = performance.timeOrigin + performance.now();
  for (let i = run.from; i < run.from + run.count; i += run.batch) {
    const events = Array.from({ length: run.batch }, (_, j) => deltaEvent(i + j));
    const res = await fetch(url!, {
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: `Bearer ${token}` },
      body: JSON.stringify({ query: MUTATION, variables: { input: { sessionId, events } } }),
    });
    const body = await res.text();
    if (res.status !== 200 || body.includes('"errors"')) throw new Error(`reportAgentEvents: ${body}`);
  }
  return startedAt;
}

process.on('message', (message: { run?: ReportRun; stop?: boolean }) => {
  if (message.stop) {
    process.disconnect();
    return;
  }
  if (!message.run) return;
  report(message.run).then(
    (startedAt) => send({ done: { startedAt } }),
    (error: unknown) => send({ failed: String(error) }),
  );
});
