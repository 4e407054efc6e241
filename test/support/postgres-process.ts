// A private PostgreSQL cluster for chaos tests (initdb + pg_ctl on a free port in a temporary
// directory), so a test can stop and restart the database without touching anyone else's. Run as
// the `postgres` user when the tests run as root (PostgreSQL refuses to run as root).
import { execFile, execFileSync, spawnSync } from 'node:child_process';
import { chmodSync, existsSync, mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pg from 'pg';
import { freePort } from './server-process';

export interface PostgresProcess {
  port: number;
  /** Connection string of the `postgres` database (create test databases from it). */
  url: string;
  /** Immediate shutdown (connections drop as in a crash). */
  stop(): void;
  start(): Promise<void>;
  /** Stops the cluster and removes its directory. */
  destroy(): void;
}

function binDir(): string {
  const root = '/usr/lib/postgresql';
  const versions = existsSync(root) ? readdirSync(root).sort((a, b) => Number(b) - Number(a)) : [];
  for (const v of versions) if (existsSync(join(root, v, 'bin', 'initdb'))) return join(root, v, 'bin');
  throw new Error('no PostgreSQL server binaries under /usr/lib/postgresql (apt-get install postgresql)');
}

function run(bin: string, args: string[]): void {
  const asRoot = process.getuid?.() === 0;
  const result = asRoot
    ? spawnSync('runuser', ['-u', 'postgres', '--', bin, ...args], { encoding: 'utf8' })
    : spawnSync(bin, args, { encoding: 'utf8' });
  if (result.status !== 0) {
    throw new Error(`${bin} ${args.join(' ')} failed (${result.status}): ${result.stderr}${result.stdout}`);
  }
}

/** run() without blocking this process: a test can probe the database while it starts. */
function runAsync(bin: string, args: string[]): Promise<void> {
  const asRoot = process.getuid?.() === 0;
  const [file, argv] = asRoot ? ['runuser', ['-u', 'postgres', '--', bin, ...args]] : [bin, args];
  return new Promise((resolve, reject) => {
    execFile(file, argv, { encoding: 'utf8' }, (error, stdout, stderr) => {
      if (error) reject(new Error(`${bin} ${args.join(' ')} failed (${error.code}): ${stderr}${stdout}`));
      else resolve();
    });
  });
}

async function waitReady(url: string, timeoutMs: number): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  let last: unknown;
  while (Date.now() < deadline) {
    const client = new pg.Client({ connectionString: url });
    try {
      await client.connect();
      await client.query('SELECT 1');
      return;
    } catch (error) {
      last = error;
    } finally {
      await client.end().catch(() => {});
    }
    await new Promise((r) => setTimeout(r, 100));
  }
  throw new Error(`private PostgreSQL did not accept connections: ${String(last)}`);
}

export async function startPostgresProcess(): Promise<PostgresProcess> {
  const bin = binDir();
  const port = await freePort();
  const dir = mkdtempSync(join(tmpdir(), 'sc-pg-'));
  chmodSync(dir, 0o777);
  if (process.getuid?.() === 0) execFileSync('chown', ['postgres:postgres', dir]);
  const data = join(dir, 'data');
  run(join(bin, 'initdb'), ['-D', data, '-U', 'postgres', '--auth=trust', '-E', 'UTF8', '--no-sync']);
  const url = `postgresql://postgres@127.0.0.1:${port}/postgres`;
  const options = [
    `-p ${port}`,
    `-k ${dir}`,
    '-c listen_addresses=127.0.0.1',
    '-c fsync=off',
    '-c synchronous_commit=off',
    '-c full_page_writes=off',
    '-c max_connections=200',
  ].join(' ');
  const pgCtl = join(bin, 'pg_ctl');
  const start = async () => {
    await runAsync(pgCtl, ['-D', data, '-o', options, '-l', join(dir, 'log'), '-w', '-t', '60', 'start']);
    await waitReady(url, 30_000);
  };
  await start();
  return {
    port,
    url,
    stop() {
      run(pgCtl, ['-D', data, '-m', 'immediate', '-w', 'stop']);
    },
    start,
    destroy() {
      spawnSync(
        process.getuid?.() === 0 ? 'runuser' : pgCtl,
        process.getuid?.() === 0
          ? ['-u', 'postgres', '--', pgCtl, '-D', data, '-m', 'immediate', '-w', 'stop']
          : ['-D', data, '-m', 'immediate', '-w', 'stop'],
      );
      rmSync(dir, { recursive: true, force: true });
    },
  };
}
