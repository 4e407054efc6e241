// Snapshot-key cost on a 1,000-file repository whose Dockerfile COPYs a directory holding most of
// them, against the floor of any content hash over git: one `git ls-tree -r` plus reading every
// file through one `git cat-file --batch`. Ratio = ours / baseline (1.0 means no overhead).
import { execFile, execFileSync, spawn } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { promisify } from 'node:util';
import { createGitTreeReader } from '../image/repo-files';
import { computeSnapshotKey } from '../image/snapshot';
import { type BenchResult, runIfMain } from './support/harness';
export type { BenchResult };

const execFileAsync = promisify(execFile);

const FILE_COUNT = 1_000;
const COPIED_COUNT = 900;
const RUNS = 9;

function buildRepo(): { dir: string; commit: string } {
  const dir = mkdtempSync(join(tmpdir(), 'singulacomp-bench-snapshot-'));
  const env = {
    PATH: process.env.PATH ?? '/usr/bin:/bin',
    HOME: dir,
    GIT_CONFIG_NOSYSTEM: '1',
    GIT_AUTHOR_NAME: 'Bench',
    GIT_AUTHOR_EMAIL: 'bench@example.com',
    GIT_COMMITTER_NAME: 'Bench',
    GIT_COMMITTER_EMAIL: 'bench@example.com',
  };
  const git = (...args: string[]) =>
    execFileSync('git', ['-C', dir, ...args], { env, encoding: 'utf8' }).trim();
  git('init', '-q', '-b', 'main');
  const write = (path: string, content: string) => {
    mkdirSync(dirname(join(dir, path)), { recursive: true });
    writeFileSync(join(dir, path), content);
  };
  write('Dockerfile', 'FROM node:22\nCOPY package.json /app/\nCOPY app/ /app/\nRUN npm ci\n');
  write('package.json', '{"name":"bench"}\n');
  // Deterministic sizes from a few hundred bytes to ~8 KiB, spread over nested directories.
  for (let i = 0; i < COPIED_COUNT; i++) {
    write(
      `app/m${i % 30}/d${i % 7}/file-${i}.ts`,
      `export const v${i} = ${i};\n`.repeat(20 + ((i * 37) % 300)),
    );
  }
  for (let i = 0; i < FILE_COUNT - COPIED_COUNT - 2; i++) {
    write(`docs/page-${i}.md`, `# page ${i}\n`.repeat(50));
  }
  git('add', '-A');
  git('commit', '-q', '-m', 'bench fixture');
  return { dir, commit: git('rev-parse', 'HEAD') };
}

async function ours(dir: string, commit: string): Promise<number> {
  const files = createGitTreeReader(dir, commit);
  try {
    const dockerfile = await files.readFile('Dockerfile');
    if (dockerfile === null) throw new Error('bench fixture has no Dockerfile');
    const result = await computeSnapshotKey({
      dockerfile,
      dockerfilePath: 'Dockerfile',
      spec: { cpu: 2, memoryGiB: 4, diskGiB: 20 },
      runtimeVersion: 'bench',
      files,
    });
    return result.contextFiles.length;
  } finally {
    files.close();
  }
}

async function baseline(dir: string, commit: string): Promise<number> {
  const { stdout } = await execFileAsync('git', ['-C', dir, 'ls-tree', '-r', '-z', commit], {
    maxBuffer: 64 * 1024 * 1024,
  });
  const oids = stdout
    .split('\0')
    .filter((record) => record !== '')
    .map((record) => record.slice(0, record.indexOf('\t')).split(' ')[2]);
  return new Promise((resolve, reject) => {
    const child = spawn('git', ['-C', dir, 'cat-file', '--batch'], { stdio: ['pipe', 'pipe', 'inherit'] });
    let bytes = 0;
    child.stdout.on('data', (chunk: Buffer) => {
      bytes += chunk.length;
    });
    child.on('error', reject);
    child.on('close', (code) =>
      code === 0 ? resolve(bytes) : reject(new Error(`git cat-file exited ${code}`)),
    );
    child.stdin.end(`${oids.join('\n')}\n`);
  });
}

function median(values: number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  const middle = Math.floor(sorted.length / 2);
  return sorted.length % 2 === 1 ? sorted[middle]! : (sorted[middle - 1]! + sorted[middle]!) / 2;
}

async function time(fn: () => Promise<unknown>): Promise<number> {
  const start = performance.now();
  await fn();
  return performance.now() - start;
}

export async function run(): Promise<BenchResult[]> {
  const { dir, commit } = buildRepo();
  try {
    const hashed = await ours(dir, commit);
    await baseline(dir, commit);
    const oursMs: number[] = [];
    const baselineMs: number[] = [];
    // Interleaved so both sides see the same machine load.
    for (let i = 0; i < RUNS; i++) {
      oursMs.push(await time(() => ours(dir, commit)));
      baselineMs.push(await time(() => baseline(dir, commit)));
    }
    const oursMedian = median(oursMs);
    const baselineMedian = median(baselineMs);
    const ratio = oursMedian / baselineMedian;
    return [
      {
        name: 'snapshot-key: 1,000-file repo, Dockerfile COPYs 901 files',
        value: Number(oursMedian.toFixed(2)),
        unit: 'ms',
        baseline: Number(baselineMedian.toFixed(2)),
        note: `median of ${RUNS}; baseline = git ls-tree -r + one git cat-file --batch over all ${FILE_COUNT} files; ${hashed} files hashed`,
      },
      {
        name: 'snapshot-key: ratio to the git read floor',
        value: Number(ratio.toFixed(3)),
        unit: 'x',
        baseline: 1,
        note: 'ours / baseline, same run',
      },
    ];
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

runIfMain(import.meta.url, run);
