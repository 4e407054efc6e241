// Wall time of clone and push through the git proxy (smart HTTP, token check, mirror sync, upstream
// forwarding) against the same operations on the mirror directly over file:// (pack protocol, no
// HTTP, no upstream), in the same run, for a repository of 1,000 files. Median of a few rounds.
import { execFile } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { promisify } from 'node:util';
import { createProject, startSession } from '../test/leases/helpers';
import { startTestApp } from '../test/support/app';
import { createTestRepo } from '../test/support/git';
import type { BenchResult } from './support/harness';

export type { BenchResult };

const FILES = 1_000;
const ROUNDS = 3;
const CHANGED_PER_PUSH = 100;

const GIT_ENV = {
  ...process.env,
  GIT_CONFIG_NOSYSTEM: '1',
  GIT_CONFIG_GLOBAL: '/dev/null',
  GIT_TERMINAL_PROMPT: '0',
  GIT_AUTHOR_NAME: 'Bench',
  GIT_AUTHOR_EMAIL: 'bench@example.com',
  GIT_COMMITTER_NAME: 'Bench',
  GIT_COMMITTER_EMAIL: 'bench@example.com',
};

const exec = promisify(execFile);
// Asynchronous: the server under measurement runs in this process and must keep answering.
const git = async (cwd: string, ...args: string[]) =>
  (await exec('git', args, { cwd, env: GIT_ENV, maxBuffer: 64 * 1024 * 1024 })).stdout.trim();

async function timed(work: () => Promise<unknown>): Promise<number> {
  const started = performance.now();
  await work();
  return performance.now() - started;
}

const median = (values: number[]) => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)]!;
const round = (ms: number) => Math.round(ms);

async function change(dir: string, round: number): Promise<void> {
  for (let i = 0; i < CHANGED_PER_PUSH; i++) {
    writeFileSync(join(dir, 'src', `file-${i}.txt`), `round ${round} of file ${i}\n`);
  }
  await git(dir, 'add', '-A');
  await git(dir, 'commit', '-q', '-m', `round ${round}`);
}

export async function run(): Promise<BenchResult[]> {
  const files: Record<string, string> = {};
  for (let i = 0; i < FILES; i++) files[join('src', `file-${i}.txt`)] = `file ${i}\n${'x'.repeat(200)}\n`;
  const repo = createTestRepo(files);
  const t = await startTestApp();
  const work = mkdtempSync(join(tmpdir(), 'sc-bench-git-'));
  try {
    const projectId = await createProject(t, repo.url);
    const session = await startSession(t, projectId);
    const project = await t.app.services.db.project.findUniqueOrThrow({
      where: {
        id: (await t.app.services.db.session.findUniqueOrThrow({ where: { id: session.sessionId } }))
          .projectId,
      },
    });
    const mirrorDir = await t.app.services.git.syncMirror({ url: project.repositoryUrl });
    const proxyUrl = `${t.url}/v1/git/${project.id}.git`;
    const auth = ['-c', `http.extraHeader=Authorization: Bearer ${session.token}`];
    // The direct pushes go to a copy, so the mirror keeps matching the upstream.
    const directTarget = join(work, 'direct-target.git');
    await git(work, 'clone', '-q', '--bare', `file://${mirrorDir}`, directTarget);

    const cloneProxy: number[] = [];
    const cloneDirect: number[] = [];
    const pushProxy: number[] = [];
    const pushDirect: number[] = [];
    for (let r = 0; r < ROUNDS; r++) {
      const viaProxy = join(work, `proxy-${r}`);
      const direct = join(work, `direct-${r}`);
      cloneDirect.push(
        await timed(() =>
          git(work, 'clone', '-q', '--branch', session.sessionId, `file://${mirrorDir}`, direct),
        ),
      );
      cloneProxy.push(
        await timed(() =>
          git(work, ...auth, 'clone', '-q', '--branch', session.sessionId, proxyUrl, viaProxy),
        ),
      );
      await change(direct, r);
      pushDirect.push(
        await timed(() => git(direct, 'push', '-q', `file://${directTarget}`, `HEAD:refs/heads/bench-${r}`)),
      );
      await change(viaProxy, r);
      pushProxy.push(await timed(() => git(viaProxy, ...auth, 'push', '-q', 'origin', 'HEAD')));
    }
    const note = `${FILES} files; push changes ${CHANGED_PER_PUSH}; median of ${ROUNDS}`;
    return [
      {
        name: 'clone through the git proxy',
        value: round(median(cloneProxy)),
        unit: 'ms',
        baseline: round(median(cloneDirect)),
        note: `${note}; baseline: clone of the mirror over file://`,
      },
      {
        name: 'push through the git proxy (lands upstream)',
        value: round(median(pushProxy)),
        unit: 'ms',
        baseline: round(median(pushDirect)),
        note: `${note}; baseline: push to a bare copy over file://`,
      },
    ];
  } finally {
    await t.stop();
    rmSync(work, { recursive: true, force: true });
    repo.remove();
  }
}
