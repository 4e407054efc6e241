// /healthz: the process is alive. /readyz: it can serve (database and pub/sub reachable, not draining).
import type { ServerResponse } from 'node:http';
import type { PubSub } from '../resolvers/events/channels';
import type { Database } from './db';

export interface HealthDeps {
  database: Database;
  pubsub: PubSub;
  draining: () => boolean;
}

export async function answerHealth(
  path: '/healthz' | '/readyz',
  res: ServerResponse,
  deps: HealthDeps,
): Promise<void> {
  if (path === '/healthz') {
    res.writeHead(200, { 'content-type': 'application/json' }).end('{"ok":true}');
    return;
  }
  const draining = deps.draining();
  const checks = { database: false, pubsub: deps.pubsub.healthy() };
  try {
    await deps.database.raw.query('SELECT 1');
    checks.database = true;
  } catch {
    checks.database = false;
  }
  const ready = checks.database && checks.pubsub && !draining;
  res
    .writeHead(ready ? 200 : 503, { 'content-type': 'application/json' })
    .end(JSON.stringify({ ok: ready, draining, ...checks }));
}
