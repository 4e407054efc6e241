// CPU profile of a createSession burst (bench/api.ts's third measurement): starts the app in-process
// with the instant provider, warms up, then profiles the server process while the load generator
// (its own process) sends CREATES creates from CONCURRENCY callers and provisioning drains. Prints
// the top self-time frames, and self time by package, and writes the .cpuprofile for a viewer.
//   npx tsx bench/profile-create.ts [creates=200] [top=15] [out=<tmpdir>/create-burst.cpuprofile]
import { readFileSync, readdirSync, writeFileSync } from 'node:fs';
import { Session } from 'node:inspector/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { startTestApp } from '../test/support/app';
import { createTestRepo } from '../test/support/git';
import { waitFor } from '../test/support/wait';
import { runLoad } from './support/harness';
import { type CpuProfile, type Frame, printTopFrames, runProfileIfMain, selfTimes } from './profile-page';
import { instantProvider, seedSessionsPage } from './support/sessions-page';

const CONCURRENCY = 20;

/** Jiffies the host spent busy and in total since boot (/proc/stat's first line), and its cores. */
function hostCpu(): { busy: number; total: number; cores: number } {
  const lines = readFileSync('/proc/stat', 'utf8').split('\n');
  const [, ...fields] = lines[0]!.trim().split(/\s+/);
  const n = fields.map(Number);
  const total = n.reduce((a, b) => a + b, 0);
  const idle = (n[3] ?? 0) + (n[4] ?? 0);
  return { busy: total - idle, total, cores: lines.filter((l) => /^cpu\d/.test(l)).length };
}

/** CPU jiffies (user + system) of every live process, by command name. */
function processCpu(): Map<number, { comm: string; jiffies: number }> {
  const out = new Map<number, { comm: string; jiffies: number }>();
  for (const pid of readdirSync('/proc').filter((d) => /^\d+$/.test(d))) {
    try {
      const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
      const comm = stat.slice(stat.indexOf('(') + 1, stat.lastIndexOf(')'));
      const rest = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
      out.set(Number(pid), { comm, jiffies: Number(rest[11]) + Number(rest[12]) });
    } catch {
      // gone meanwhile
    }
  }
  return out;
}

/** Where the host's CPU went between two process snapshots: by command, exited processes apart. */
function cpuByCommand(
  before: Map<number, { comm: string; jiffies: number }>,
  after: Map<number, { comm: string; jiffies: number }>,
  hostBusyJiffies: number,
): Array<[string, number]> {
  const sums = new Map<string, number>();
  let seen = 0;
  for (const [pid, p] of after) {
    const delta = p.jiffies - (before.get(pid)?.jiffies ?? 0);
    if (delta <= 0) continue;
    sums.set(p.comm, (sums.get(p.comm) ?? 0) + delta);
    seen += delta;
  }
  sums.set('(exited meanwhile, and the kernel)', hostBusyJiffies - seen);
  return [...sums].sort((a, b) => b[1] - a[1]);
}

/** Self time per package (node_modules/<name>), our own code by top folder, and the VM states. */
function byPackage(frames: Frame[]): Array<[string, number]> {
  const sums = new Map<string, number>();
  for (const f of frames) {
    const file = f.frame.split(' ').slice(1).join(' ');
    const pkg =
      /node_modules\/((?:@[^/]+\/)?[^/]+)/.exec(file)?.[1] ??
      (file.startsWith('node:') ? 'node:' : file ? (file.split('/')[0] ?? file) : f.frame);
    sums.set(pkg, (sums.get(pkg) ?? 0) + f.percent);
  }
  return [...sums].sort((a, b) => b[1] - a[1]);
}

async function main(): Promise<void> {
  const creates = Number(process.argv[2] ?? 200);
  const top = Number(process.argv[3] ?? 15);
  const out = process.argv[4] ?? join(tmpdir(), 'create-burst.cpuprofile');
  const repo = createTestRepo({ 'README.md': '# bench\n' });
  const t = await startTestApp({ providers: [instantProvider()] });
  try {
    const db = t.app.services.db;
    const { accountId, projectId } = await seedSessionsPage(t, repo.url, 1);
    await db.account.update({ where: { id: accountId }, data: { concurrentSessionLimit: 100_000 } });
    const load = {
      url: t.graphqlUrl,
      body: JSON.stringify({
        query:
          'mutation($i: CreateSessionInput!) { createSession(input: $i) { __typename ... on Error { code message } } }',
        variables: { i: { projectId } },
      }),
      headers: { authorization: `Bearer ${t.adminToken}` },
      concurrency: CONCURRENCY,
    };
    const drained = () =>
      waitFor(async () => (await db.session.count({ where: { status: 'PROVISIONING' } })) === 0, {
        timeoutMs: 120_000,
        intervalMs: 20,
        what: 'every created session to leave PROVISIONING',
      });
    const warm = await runLoad({ ...load, count: 40 });
    if (warm.failures > 0) throw new Error(`createSession failed: ${warm.firstFailure}`);
    await drained();
    const stats = t.app.services.database.stats;
    stats.log = [];
    const statementsBefore = stats.statements;
    const jobStatementsBefore = stats.jobStatements;
    const hostBefore = hostCpu();
    const processesBefore = processCpu();
    const ownBefore = process.cpuUsage();
    const session = new Session();
    session.connect();
    await session.post('Profiler.enable');
    await session.post('Profiler.start');
    const measured = await runLoad({ ...load, count: creates });
    await drained();
    const { profile } = (await session.post('Profiler.stop')) as unknown as { profile: CpuProfile };
    session.disconnect();
    const own = process.cpuUsage(ownBefore);
    const host = hostCpu();
    const processesAfter = processCpu();
    const statements = stats.statements - statementsBefore;
    const jobStatements = stats.jobStatements - jobStatementsBefore;
    const kinds = new Map<string, number>();
    for (const { sql } of stats.log) {
      const kind = sql.replace(/\s+/g, ' ').slice(0, 70);
      kinds.set(kind, (kinds.get(kind) ?? 0) + 1);
    }
    stats.log = null;
    if (measured.failures > 0) throw new Error(`createSession failed: ${measured.firstFailure}`);
    writeFileSync(out, JSON.stringify(profile));
    const { frames, totalMs } = selfTimes(profile);
    process.stdout.write(
      `${creates} creates, p50 ${measured.p50Ms.toFixed(1)} ms, ${measured.requestsPerSecond.toFixed(1)}/s; ${totalMs.toFixed(0)} ms busy (${(totalMs / creates).toFixed(1)} ms per create, idle excluded); ${out}\n`,
    );
    const busyMs = (host.busy - hostBefore.busy) * 10;
    const wallMs = (host.total - hostBefore.total) * 10;
    process.stdout.write(
      `host CPU ${(busyMs / creates).toFixed(1)} ms per create (${((100 * busyMs) / wallMs).toFixed(0)}% of ${wallMs / 1000 / (host.cores || 1)} s × ${host.cores} cores busy); this process ${((own.user + own.system) / 1000 / creates).toFixed(1)} ms (system ${(own.system / 1000 / creates).toFixed(1)}); ${(statements / creates).toFixed(1)} SQL statements per create, and ${(jobStatements / creates).toFixed(1)} of the job queue\n`,
    );
    process.stdout.write(
      'host CPU per create by command (MainThread: this server and the load generator):\n',
    );
    for (const [comm, jiffies] of cpuByCommand(
      processesBefore,
      processesAfter,
      host.busy - hostBefore.busy,
    ).slice(0, 8))
      process.stdout.write(`  ${((jiffies * 10) / creates).toFixed(1).padStart(6)} ms  ${comm}\n`);
    process.stdout.write('SQL statements per create:\n');
    for (const [kind, count] of [...kinds].sort((a, b) => b[1] - a[1]).slice(0, 30))
      process.stdout.write(`  ${(count / creates).toFixed(2).padStart(6)}  ${kind}\n`);
    process.stdout.write('by package:\n');
    for (const [pkg, percent] of byPackage(frames).slice(0, 12))
      process.stdout.write(`  ${percent.toFixed(1).padStart(5)}%  ${pkg}\n`);
    printTopFrames(frames, top);
  } finally {
    await t.stop();
    repo.remove();
  }
}

runProfileIfMain(import.meta.url, main);
