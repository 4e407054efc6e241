// The isolated sandbox's filesystem when the application itself lives below /tmp (a checkout in
// /tmp, as CI jobs often use): its read-only binds stay visible over the sandbox's private /tmp,
// while the data dir and the host's other /tmp files stay hidden.
import { spawnSync } from 'node:child_process';
import { chownSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, expect, test } from 'vitest';
import { bwrapArgs, bwrapAvailable } from '../../resolvers/providers/local-isolation';

const root = mkdtempSync(join(tmpdir(), 'sc-bwrap-'));
afterAll(() => rmSync(root, { recursive: true, force: true }));

test('an application below /tmp stays visible inside the sandbox; its data dir and host /tmp files do not', () => {
  expect(bwrapAvailable()).toBe(true);
  const app = join(root, 'app');
  const dataDir = join(app, '.data');
  const workspace = join(dataDir, 'sandboxes', 's1', 'workspace');
  const home = join(dataDir, 'sandboxes', 's1', 'home');
  const runDir = join(root, 'run');
  for (const dir of [workspace, home, join(runDir, 'egress'), join(runDir, 'ingress')])
    mkdirSync(dir, { recursive: true });
  writeFileSync(join(app, 'agent.mjs'), 'the application\n');
  writeFileSync(join(dataDir, 'secret.key'), 'server secret\n');
  writeFileSync(join(root, 'host-file'), 'host tmp\n');
  // A root server runs the sandbox as an unprivileged uid of its own (outside the default range).
  const identity = process.getuid?.() === 0 ? { uid: 3_100_000, gid: 3_100_000 } : null;
  if (identity) for (const dir of [workspace, home]) chownSync(dir, identity.uid, identity.gid);

  const script = [
    `cat ${join(app, 'agent.mjs')}`,
    `cat ${join(dataDir, 'secret.key')} 2>/dev/null || echo no-secret`,
    `cat ${join(root, 'host-file')} 2>/dev/null || echo no-host-file`,
    `touch ${join(app, 'written')} 2>/dev/null && echo app-writable || echo app-read-only`,
  ].join('; ');
  const run = spawnSync(
    'bwrap',
    [...bwrapArgs({ workspace, home, runDir, dataDir, readOnly: [app], identity }), '/bin/sh', '-c', script],
    { encoding: 'utf8' },
  );
  expect(run.stderr).toBe('');
  expect(run.stdout.trim().split('\n')).toEqual([
    'the application',
    'no-secret',
    'no-host-file',
    'app-read-only',
  ]);
});

test('a server that is not root runs the same arrangement as its own uid, without capabilities', () => {
  expect(process.getuid?.()).toBe(0);
  // A stand-in for a rootless server: this process as an unprivileged uid that owns its files.
  const uid = 3_100_001;
  const base = join(root, 'rootless');
  const dataDir = join(base, 'data');
  const workspace = join(dataDir, 'sandboxes', 's1', 'workspace');
  const home = join(dataDir, 'sandboxes', 's1', 'home');
  const runDir = join(base, 'run');
  for (const dir of [workspace, home, join(runDir, 'egress'), join(runDir, 'ingress')])
    mkdirSync(dir, { recursive: true });
  writeFileSync(join(dataDir, 'secret.key'), 'server secret\n');
  spawnSync('chown', ['-R', `${uid}:${uid}`, base]);
  chownSync(root, uid, uid);
  const script = [
    'cat /proc/self/uid_map',
    "grep -E '^(CapEff|CapBnd|NoNewPrivs)' /proc/self/status",
    `cat ${join(dataDir, 'secret.key')} 2>/dev/null || echo no-secret`,
    'unshare -m true 2>/dev/null || echo no-unshare',
    `umount -l ${dataDir} 2>/dev/null || echo no-umount`,
    'touch ./written && echo workspace-writable',
  ].join('; ');
  const run = spawnSync(
    'setpriv',
    [
      `--reuid=${uid}`,
      `--regid=${uid}`,
      '--clear-groups',
      'bwrap',
      ...bwrapArgs({ workspace, home, runDir, dataDir, readOnly: [], identity: null }),
      '/bin/sh',
      '-c',
      script,
    ],
    { encoding: 'utf8' },
  );
  chownSync(root, 0, 0);
  expect(run.stderr).toBe('');
  expect(
    run.stdout
      .trim()
      .split('\n')
      .map((line) => line.trim().replace(/\s+/g, ' ')),
  ).toEqual([
    `${uid} ${uid} 1`,
    'CapEff: 0000000000000000',
    'CapBnd: 0000000000000000',
    'NoNewPrivs: 1',
    'no-secret',
    'no-unshare',
    'no-umount',
    'workspace-writable',
  ]);
});
