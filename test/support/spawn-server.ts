// Several servers sharing one PostgreSQL (admission tests): real server processes from
// server-process.ts, logging warnings so a failing start explains itself.
import { type ServerProcess, type ServerProcessOptions, startServerProcess } from './server-process';

export { TEST_SECRET_KEY, killLocalSandboxes, postGraphql } from './server-process';

export type SpawnedServer = ServerProcess;

export function spawnServer(options: ServerProcessOptions = {}): Promise<SpawnedServer> {
  return startServerProcess({ logLevel: 'warn', ...options });
}

/** Starts servers at the same time; when one fails to start, stops those that did and throws its error. */
export async function spawnServers(list: ServerProcessOptions[]): Promise<SpawnedServer[]> {
  const settled = await Promise.allSettled(list.map(spawnServer));
  const failed = settled.find((r): r is PromiseRejectedResult => r.status === 'rejected');
  if (!failed) return settled.map((r) => (r as PromiseFulfilledResult<SpawnedServer>).value);
  await Promise.all(settled.map((r) => (r.status === 'fulfilled' ? r.value.stop() : undefined)));
  throw failed.reason;
}
