// The chaos tests' fleet: a private PostgreSQL (and, when asked, a private redis-server on its own
// port), two real server processes on it, the bootstrap admin's token, one project on a real git
// repository, and a PostgreSQL client for asserting what was stored. LOCAL sandboxes can be marked
// with a unique `sleep` so the test counts exactly its own sandbox processes.
import { execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { TypedDocumentNode } from '@graphql-typed-document-node/core';
import { print } from 'graphql';
import pg from 'pg';
import { CreateProjectDocument, UpdateAccountDocument } from '../generated/graphql';
import { createTestRepo } from '../support/git';
import { type PostgresProcess, startPostgresProcess } from '../support/postgres-process';
import { type RedisProcess, startRedisProcess } from '../support/server-process';
import { type SpawnedServer, killLocalSandboxes, postGraphql, spawnServer } from '../support/spawn-server';

export interface ChaosFleetOptions {
  /** Project (and repository) name. */
  name: string;
  /** The account's concurrent-session limit (unset: the tier's). */
  limit?: number;
  /** Start a private redis-server and give both processes REDIS_URL. @default false */
  redis?: boolean;
  /** One data dir for both processes, as a single-host install configures. @default false */
  sharedDataDir?: boolean;
  /**
   * LOCAL sandboxes run `exec sleep <unique>` unisolated (bubblewrap and its bridge would repeat
   * the command line), so `sandboxProcesses()` counts exactly this fleet's. @default false
   */
  markSandboxes?: boolean;
  /** Extra environment of both processes. */
  env?: Record<string, string>;
}

export interface ChaosFleet {
  postgres: PostgresProcess;
  redis: RedisProcess | null;
  /** The two server processes. */
  servers: [SpawnedServer, SpawnedServer];
  adminToken: string;
  /** Global id of the fleet's project. */
  projectId: string;
  sql: pg.Client;
  /** Posts a typed document to one process; the raw answer (status, headers, json). */
  post<T, V>(
    server: SpawnedServer,
    doc: TypedDocumentNode<T, V>,
    variables: V,
  ): ReturnType<typeof postGraphql>;
  /** Pids of this fleet's sandbox processes (markSandboxes only). */
  sandboxProcesses(): number[];
  stop(): Promise<void>;
}

/** Pids of processes whose command line mentions marker. */
export function processesWith(marker: string): number[] {
  const out = execFileSync('ps', ['-eo', 'pid=,args='], { encoding: 'utf8' });
  return out
    .split('\n')
    .filter((line) => line.includes(marker) && !line.includes('ps -eo'))
    .map((line) => Number.parseInt(line.trim(), 10))
    .filter((pid) => Number.isInteger(pid));
}

export async function startChaosFleet(options: ChaosFleetOptions): Promise<ChaosFleet> {
  const marker = `sleep ${600 + Math.floor(Math.random() * 900)}`;
  const dataDir = options.sharedDataDir ? mkdtempSync(join(tmpdir(), 'sc-chaos-')) : undefined;
  const repo = createTestRepo({ 'README.md': `# ${options.name}\n` });
  const postgres = await startPostgresProcess();
  const redis = options.redis ? await startRedisProcess() : null;
  const env = {
    ...(options.markSandboxes
      ? { SINGULACOMP_LOCAL_ENTRY: `exec ${marker}`, SINGULACOMP_LOCAL_ISOLATION: 'none' }
      : {}),
    ...options.env,
  };
  const spawn = () =>
    spawnServer({
      databaseUrl: postgres.url,
      ...(redis ? { redisUrl: redis.url } : {}),
      ...(dataDir ? { dataDir } : {}),
      env,
      startTimeoutMs: 180_000,
    });
  const started: SpawnedServer[] = [];
  try {
    started.push(await spawn());
    started.push(await spawn());
  } catch (error) {
    // A process that did not come up must not leave the others running.
    await Promise.all(started.map((s) => s.stop()));
    await redis?.stop();
    postgres.destroy();
    repo.remove();
    if (dataDir) rmSync(dataDir, { recursive: true, force: true });
    throw error;
  }
  const servers = started as [SpawnedServer, SpawnedServer];
  const adminToken = servers.map((s) => s.bootstrapToken()).find((t): t is string => t !== null)!;
  const post: ChaosFleet['post'] = (server, doc, variables) =>
    postGraphql(server.graphqlUrl, { query: print(doc), variables }, adminToken);
  if (options.limit !== undefined) {
    const limited = await post(servers[0], UpdateAccountDocument, {
      input: { concurrentSessionLimit: options.limit },
    });
    if (limited.status !== 200 || limited.json.errors) throw new Error(JSON.stringify(limited.json));
  }
  const created = await post(servers[1], CreateProjectDocument, {
    input: { name: options.name, repositoryUrl: repo.url },
  });
  const project = created.json.data?.createProject as { project?: { id: string } } | undefined;
  if (!project?.project) throw new Error(JSON.stringify(created.json));
  const sql = new pg.Client({ connectionString: postgres.url });
  // A PostgreSQL outage is part of some tests: a dropped connection must not crash the run.
  sql.on('error', () => {});
  await sql.connect();
  const sandboxProcesses = () => (options.markSandboxes ? processesWith(marker) : []);

  return {
    postgres,
    redis,
    servers,
    adminToken,
    projectId: project.project.id,
    sql,
    post,
    sandboxProcesses,
    async stop() {
      await sql.end().catch(() => undefined);
      if (process.env.CHAOS_DEBUG) console.log(servers.map((s) => s.output()).join('\n----\n'));
      await Promise.all(servers.map((s) => s.stop()));
      if (dataDir) killLocalSandboxes(dataDir);
      for (const pid of sandboxProcesses()) {
        try {
          process.kill(pid, 'SIGKILL');
        } catch {}
      }
      await redis?.stop();
      postgres.destroy();
      if (dataDir) rmSync(dataDir, { recursive: true, force: true });
      repo.remove();
    },
  };
}
