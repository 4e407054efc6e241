import { spawn } from 'node:child_process';
import {
  existsSync,
  lstatSync,
  mkdirSync,
  mkdtempSync,
  readFileSync,
  readdirSync,
  rmSync,
  statSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { connect } from 'node:net';
import { join } from 'node:path';
import { expect, test } from 'vitest';
import { createGitService } from '../../resolvers/git/git';
import { chownTree, createLocalProvider } from '../../resolvers/providers/local';
import { createUidAllocator } from '../../resolvers/providers/local-uids';
import { killByEnvironment, pidsWithEnvironment } from '../../resolvers/providers/process-tree';
import type { CreateSandboxRequest } from '../../resolvers/providers/types';
import { createTestRepo } from '../support/git';
import { waitFor } from '../support/wait';

/** create()'s input for test sandbox `n` of `sessionId`: the session's branch of `repositoryUrl`. */
function createInput(n: number, sessionId: string, repositoryUrl: string): CreateSandboxRequest {
  return {
    sandboxId: `00000000-0000-4000-8000-00000000000${n}`,
    sessionId,
    projectId: 'p',
    spec: { cpu: 1, memoryGiB: 1, diskGiB: 1 },
    snapshotRef: null,
    env: { SINGULACOMP_SESSION_ID: sessionId },
    workspace: { repositoryUrl, branch: 'session-branch' },
    labels: {},
  };
}
test('stopping a LOCAL sandbox also ends processes that left its process group', async () => {
  const repo = createTestRepo();
  const root = mkdtempSync(join(tmpdir(), 'sc-local-'));
  const git = createGitService({ cacheDir: join(root, 'git') });
  await git.cutBranch({ url: repo.url }, 'main', 'session-branch');
  const provider = createLocalProvider({
    rootDir: join(root, 'sandboxes'),
    // The entry starts a child in a session (process group) of its own, as the daemon does with OpenCode.
    entryCommand: 'setsid sleep 600 & exec sleep 600',
    clone: (r, branch, dir) => git.cloneWorkspace(r, branch, dir),
    stopGraceMs: 500,
    isolation: { mode: 'none' },
  });
  const sessionId = `test-${Date.now()}`;
  const created = await provider.create(createInput(1, sessionId, repo.url));
  expect(created.state).toBe('STARTED');
  const running = await waitFor(async () => {
    const pids = await pidsWithEnvironment('SINGULACOMP_SESSION_ID', sessionId);
    return pids.length >= 2 ? pids : null;
  });
  expect(running.length).toBeGreaterThanOrEqual(2);

  const stopped = await provider.stop(created.providerSandboxId);
  expect(stopped.state).toBe('STOPPED');
  expect(await pidsWithEnvironment('SINGULACOMP_SESSION_ID', sessionId)).toEqual([]);
  await provider.destroy(created.providerSandboxId);
  expect(await provider.status(created.providerSandboxId)).toBe('DESTROYED');
});

test('killing by environment returns only once every marked process is gone, also ones forked meanwhile', async () => {
  // A marked shell keeps forking marked children (as a daemon restarting OpenCode would): a kill
  // that signalled one scan's processes and returned left the children forked after that scan.
  const marker = `kill-${Date.now()}-${process.pid}`;
  const forker = spawn(
    '/bin/sh',
    ['-c', 'i=0; while [ $i -lt 300 ]; do sleep 600 & i=$((i+1)); sleep 0.01; done; wait'],
    {
      env: { PATH: process.env.PATH ?? '/usr/bin:/bin', SC_KILL_MARKER: marker },
      stdio: 'ignore',
    },
  );
  try {
    const running = await waitFor(async () => {
      const pids = await pidsWithEnvironment('SC_KILL_MARKER', marker);
      return pids.length >= 20 ? pids : null;
    });
    expect(running).toContain(forker.pid);
    expect(await killByEnvironment('SC_KILL_MARKER', marker)).toBeGreaterThanOrEqual(running.length);
    expect(await pidsWithEnvironment('SC_KILL_MARKER', marker)).toEqual([]);
  } finally {
    await killByEnvironment('SC_KILL_MARKER', marker, 30_000);
  }
});

test('finding processes by environment reads large environments whole and matches whole entries', async () => {
  const marker = `env-${Date.now()}-${process.pid}`;
  // One variable holds at most 128 KiB (MAX_ARG_STRLEN): four make 200 kB.
  const bulk = Object.fromEntries([1, 2, 3, 4].map((i) => [`SC_BULK_${i}`, 'x'.repeat(50_000)]));
  const env = { PATH: process.env.PATH ?? '/usr/bin:/bin', ...bulk };
  // The marker comes after 200 kB of environment; the other process's value only starts with it.
  const marked = spawn('sleep', ['600'], { env: { ...env, SC_ENV_MARKER: marker }, stdio: 'ignore' });
  const prefixed = spawn('sleep', ['600'], {
    env: { ...env, SC_ENV_MARKER: `${marker}-more` },
    stdio: 'ignore',
  });
  try {
    const found = await waitFor(async () => {
      const pids = await pidsWithEnvironment('SC_ENV_MARKER', marker);
      return pids.length > 0 ? pids : null;
    });
    expect(found).toEqual([marked.pid]);
    expect(await pidsWithEnvironment('SC_ENV_MARKER', `${marker}-more`)).toEqual([prefixed.pid]);
  } finally {
    marked.kill('SIGKILL');
    prefixed.kill('SIGKILL');
  }
});

test('an isolated LOCAL sandbox runs as a claimed uid, stops gracefully in its own session and gives the uid back', async () => {
  expect(process.getuid?.()).toBe(0);
  const repo = createTestRepo();
  const root = mkdtempSync(join(tmpdir(), 'sc-local-'));
  const claimsDir = join(root, 'uids');
  const git = createGitService({ cacheDir: join(root, 'git') });
  await git.cutBranch({ url: repo.url }, 'main', 'session-branch');
  const provider = createLocalProvider({
    rootDir: join(root, 'sandboxes'),
    // SIGTERM must reach the entry inside the sandbox's own session, not only the bwrap around it.
    // The entry says when its trap is set: a SIGTERM before that would end it the default way.
    entryCommand:
      "trap 'echo graceful > {home}/stopped; exit 0' TERM; echo set > {home}/trapped; while :; do sleep 0.1; done",
    clone: (r, branch, dir) => git.cloneWorkspace(r, branch, dir),
    stopGraceMs: 10_000,
    isolation: {
      mode: 'bwrap',
      dataDir: root,
      uids: createUidAllocator({ range: { first: 3_200_000, count: 10 }, claimsDir }),
    },
  });
  const sessionId = `test-${Date.now()}`;
  const created = await provider.create(createInput(2, sessionId, repo.url));
  const dir = join(root, 'sandboxes', created.providerSandboxId);
  const [claim] = readdirSync(claimsDir);
  const uid = Number(claim);
  expect(uid).toBeGreaterThanOrEqual(3_200_000);
  expect(readFileSync(join(claimsDir, claim!), 'utf8')).toBe(dir);
  expect(statSync(join(dir, 'workspace')).uid).toBe(uid);
  expect(statSync(join(dir, 'home')).uid).toBe(uid);
  // The entry's shell runs as that uid, with its TERM trap in place.
  await waitFor(async () => {
    if (!existsSync(join(dir, 'home', 'trapped'))) return null;
    for (const pid of await pidsWithEnvironment('SINGULACOMP_SESSION_ID', sessionId)) {
      const status = readFileSync(`/proc/${pid}/status`, 'utf8');
      if (
        readFileSync(`/proc/${pid}/cmdline`, 'utf8').startsWith('/bin/sh') &&
        status.includes(`Uid:\t${uid}\t`)
      )
        return true;
    }
    return null;
  });

  expect((await provider.stop(created.providerSandboxId)).state).toBe('STOPPED');
  expect(readFileSync(join(dir, 'home', 'stopped'), 'utf8')).toBe('graceful\n');
  expect(await pidsWithEnvironment('SINGULACOMP_SESSION_ID', sessionId)).toEqual([]);
  await provider.destroy(created.providerSandboxId);
  expect(readdirSync(claimsDir)).toEqual([]);
  rmSync(root, { recursive: true, force: true });
});

/** An isolated provider whose clone first waits until the sandbox's bridge runs (and may then fail). */
function heldProvider(root: string, clone: (dir: string) => Promise<unknown>, uidBase: number) {
  return createLocalProvider({
    rootDir: join(root, 'sandboxes'),
    entryCommand: 'ls -A {workspace} > {home}/seen; id -u >> {home}/seen; exec sleep 600',
    clone: (_repo, _branch, dir) => clone(dir),
    stopGraceMs: 2_000,
    isolation: {
      mode: 'bwrap',
      dataDir: root,
      uids: createUidAllocator({ range: { first: uidBase, count: 10 }, claimsDir: join(root, 'uids') }),
    },
  });
}

/** The bridge of the sandbox of `sessionId` once it runs (`node <bridge script> …`). */
async function bridgeRunning(sessionId: string): Promise<number> {
  return waitFor(async () => {
    for (const pid of await pidsWithEnvironment('SINGULACOMP_SESSION_ID', sessionId)) {
      const argv = readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0');
      if (argv[1]?.endsWith('local-bridge.mjs')) return pid;
    }
    return null;
  });
}

test('an isolated LOCAL sandbox starts while its workspace is cloned and runs its entry on the whole clone', async () => {
  const repo = createTestRepo();
  const root = mkdtempSync(join(tmpdir(), 'sc-local-'));
  const git = createGitService({ cacheDir: join(root, 'git') });
  await git.cutBranch({ url: repo.url }, 'main', 'session-branch');
  const sessionId = `test-held-${Date.now()}`;
  let bridgeBeforeClone: number | null = null;
  const provider = heldProvider(
    root,
    async (dir) => {
      bridgeBeforeClone = await bridgeRunning(sessionId);
      // The entry has not run yet: nothing but the bridge is in the sandbox.
      expect(existsSync(join(dir, '..', 'home', 'seen'))).toBe(false);
      return git.cloneWorkspace({ url: repo.url }, 'session-branch', dir);
    },
    3_200_100,
  );
  const created = await provider.create(createInput(3, sessionId, repo.url));
  try {
    expect(bridgeBeforeClone).toBeGreaterThan(0);
    const dir = join(root, 'sandboxes', created.providerSandboxId);
    const uid = statSync(join(dir, 'workspace')).uid;
    expect(uid).toBeGreaterThanOrEqual(3_200_100);
    expect(statSync(join(dir, 'workspace', 'README.md')).uid).toBe(uid);
    const seen = await waitFor(() => {
      const text = existsSync(join(dir, 'home', 'seen'))
        ? readFileSync(join(dir, 'home', 'seen'), 'utf8')
        : '';
      return text.split('\n').length > 3 ? text : null;
    });
    expect(seen).toBe(`.git\nREADME.md\n${uid}\n`);
  } finally {
    await provider.destroy(created.providerSandboxId);
    rmSync(root, { recursive: true, force: true });
  }
});

test('a failed clone ends the isolated sandbox started beside it before its entry ran', async () => {
  const root = mkdtempSync(join(tmpdir(), 'sc-local-'));
  const sessionId = `test-held-fail-${Date.now()}`;
  const provider = heldProvider(
    root,
    async () => {
      await bridgeRunning(sessionId);
      throw new Error('clone refused');
    },
    3_200_200,
  );
  const create = provider.create(createInput(4, sessionId, '/nowhere'));
  await expect(create).rejects.toThrow('clone refused');
  const dir = join(root, 'sandboxes', 'local-00000000-0000-4000-8000-000000000004');
  expect(await pidsWithEnvironment('SINGULACOMP_SESSION_ID', sessionId)).toEqual([]);
  expect(existsSync(join(dir, 'home', 'seen'))).toBe(false);
  // The host's end of its network is closed too: nothing listens on its service port.
  const { servicePort } = JSON.parse(readFileSync(join(dir, 'sandbox.json'), 'utf8')) as {
    servicePort: number;
  };
  const refused = await new Promise<string>((resolve) => {
    const socket = connect(servicePort, '127.0.0.1');
    socket.once('connect', () => {
      socket.destroy();
      resolve('connected');
    });
    socket.once('error', (error: NodeJS.ErrnoException) => resolve(error.code ?? 'error'));
  });
  expect(refused).toBe('ECONNREFUSED');
  await provider.destroy('local-00000000-0000-4000-8000-000000000004');
  expect(readdirSync(join(root, 'uids'))).toEqual([]);
  rmSync(root, { recursive: true, force: true });
});

test("chownTree gives a sandbox's tree to its uid, links themselves and never what they point to", async () => {
  const root = mkdtempSync(join(tmpdir(), 'sc-chown-'));
  try {
    const tree = join(root, 'workspace');
    const outside = join(root, 'outside');
    mkdirSync(join(tree, 'src', 'deep'), { recursive: true });
    mkdirSync(outside);
    writeFileSync(join(tree, 'src', 'deep', 'file.txt'), 'x');
    writeFileSync(join(outside, 'secret'), 'y');
    symlinkSync(outside, join(tree, 'link-to-dir'));
    symlinkSync(join(outside, 'secret'), join(tree, 'src', 'link-to-file'));
    await chownTree(tree, 54_321, 54_322);
    for (const path of ['', 'src', 'src/deep', 'src/deep/file.txt', 'link-to-dir', 'src/link-to-file']) {
      const stat = lstatSync(join(tree, path));
      expect([path, stat.uid, stat.gid]).toEqual([path, 54_321, 54_322]);
    }
    for (const path of [outside, join(outside, 'secret')]) expect(statSync(path).uid).toBe(0);
  } finally {
    rmSync(root, { recursive: true, force: true });
  }
});
