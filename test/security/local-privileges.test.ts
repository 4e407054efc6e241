// R-ISO-2, issue attack 1: a LOCAL sandbox of a server running as root held host root with every
// capability (uid 0 mapped to host uid 0), so from inside it could write /proc/sys/kernel/core_pattern,
// remount read-only binds writable, unmount the tmpfs that hides the data dir and read the product's
// checkout. Each attack below runs as a shell command from inside a real isolated sandbox: its entry
// command (a loop in the workspace) runs what the test drops into its workspace, with exactly the
// credentials, namespaces and mounts the daemon gets.
import {
  existsSync,
  mkdirSync,
  mkdtempSync,
  readFileSync,
  readdirSync,
  renameSync,
  rmSync,
  statSync,
  writeFileSync,
} from 'node:fs';
import { join, resolve } from 'node:path';
import { afterAll, afterEach, beforeAll, describe, expect, test } from 'vitest';
import { bwrapAvailable } from '../../resolvers/providers/local-isolation';
import { localRunDir } from '../../resolvers/providers/local';
import { pidsWithEnvironment } from '../../resolvers/providers/process-tree';
import { type TestApp, startTestApp } from '../support/app';
import { createTestRepo } from '../support/git';
import { waitFor } from '../support/wait';
import { type RunningSandbox, runningSandboxes } from './fixtures/running-sandboxes';

// Runs inside the sandbox: every `<id>.sh` dropped into .probe is run with sh, its output and exit
// status written to `<id>.out` (renamed into place whole).
const RUNNER = `#!/bin/sh
mkdir -p .probe
while :; do
  for request in .probe/*.sh; do
    [ -f "$request" ] || continue
    id=\${request%.sh}
    sh "$request" > "$id.tmp" 2>&1
    echo "exit:$?" >> "$id.tmp"
    mv "$id.tmp" "$id.out"
    rm -f "$request"
  done
  sleep 0.1
done
`;

const APP_ROOT = resolve(new URL('../..', import.meta.url).pathname);

type Box = RunningSandbox;

/** Fields of /proc/<pid>/status as the host sees them. */
function hostStatus(pid: number): Record<string, string> {
  return Object.fromEntries(
    readFileSync(`/proc/${pid}/status`, 'utf8')
      .split('\n')
      .map((line) => line.split(':\t') as [string, string])
      .filter(([, value]) => value !== undefined),
  );
}

/** Session id (field 6) of a process, from the host. */
function sessionOf(pid: number): number {
  const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
  return Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[3]);
}

describe('a LOCAL sandbox of a root server holds no host privileges', () => {
  let t: TestApp;
  const repo = createTestRepo({ 'README.md': '# privileges\n', 'runner.sh': RUNNER });
  const boxes: Box[] = [];
  // Where the README puts it by default: inside the checkout (./.data), so a sandbox that could
  // see the checkout and lift the data dir's cover would read the server's secrets through it.
  mkdirSync(join(APP_ROOT, '.data'), { recursive: true });
  const dataDir = mkdtempSync(join(APP_ROOT, '.data', 'privileges-'));

  beforeAll(async () => {
    expect(bwrapAvailable()).toBe(true);
    // The attacks matter when the server is root: that is the case this file reproduces.
    expect(process.getuid?.()).toBe(0);
    t = await startTestApp({
      dataDir,
      env: { SINGULACOMP_LOCAL_ENTRY: 'exec sh ./runner.sh', SINGULACOMP_LOCAL_ISOLATION: 'bwrap' },
    });
    for (const box of await runningSandboxes(t, 'privileges', repo.url)) {
      await waitFor(() => existsSync(join(box.dir, 'workspace', '.probe')), 30_000, 'the runner').catch(
        (error: Error) => {
          const log = join(box.dir, 'entry.log');
          const listing = existsSync(box.dir) ? readdirSync(box.dir).join(',') : '(no dir)';
          throw new Error(
            `${error.message} ${box.dir}: ${listing}\n${existsSync(log) ? readFileSync(log, 'utf8') : '(no log)'}`,
          );
        },
      );
      boxes.push(box);
    }
  });
  afterAll(async () => {
    await t?.stop();
    rmSync(dataDir, { recursive: true, force: true });
  });

  afterEach(async ({ task }) => {
    if (task.result?.state !== 'fail') return;
    for (const box of boxes) {
      const log = existsSync(join(box.dir, 'entry.log'))
        ? readFileSync(join(box.dir, 'entry.log'), 'utf8')
        : '(none)';
      console.error(`sandbox ${box.id} entry log:\n${log.slice(-3_000)}`);
    }
  });

  let requests = 0;
  /** Runs `script` with sh inside the sandbox; resolves to its output, the last line `exit:<status>`. */
  async function inside(box: Box, script: string): Promise<string> {
    const id = `r${++requests}`;
    const base = join(box.dir, 'workspace', '.probe', id);
    writeFileSync(`${base}.tmp-request`, script);
    renameSync(`${base}.tmp-request`, `${base}.sh`);
    return waitFor(() => (existsSync(`${base}.out`) ? readFileSync(`${base}.out`, 'utf8') : null), 30_000);
  }

  /** The runner's shell process, as the host sees it. */
  async function runnerPid(box: Box): Promise<number> {
    const pids = await pidsWithEnvironment('SINGULACOMP_SESSION_ID', box.sessionId);
    const runner = pids.find((pid) => {
      try {
        const [program, script] = readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0');
        return program === 'sh' && script === './runner.sh';
      } catch {
        return false;
      }
    });
    if (!runner) throw new Error(`no runner among ${pids.join(', ')}`);
    return runner;
  }

  test('runs as an unprivileged host uid, one per sandbox, with no capabilities and no_new_privs', async () => {
    const [own, other] = boxes as [Box, Box];
    const uidMap = await inside(own, 'cat /proc/self/uid_map; cat /proc/self/gid_map');
    expect(uidMap).toMatch(/exit:0\n$/);
    const mappings = uidMap
      .trim()
      .split('\n')
      .slice(0, -1)
      .map((line) => line.trim().split(/\s+/));
    expect(mappings.length).toBeGreaterThan(0);
    // Field 2 is the uid (gid) on the host side of the user namespace: never root.
    for (const [, hostId] of mappings) expect(hostId).not.toBe('0');

    const status = await inside(
      own,
      "grep -E '^(CapInh|CapPrm|CapEff|CapBnd|CapAmb|NoNewPrivs)' /proc/self/status",
    );
    expect(status).toContain('CapEff:\t0000000000000000');
    expect(status).toContain('CapPrm:\t0000000000000000');
    expect(status).toContain('CapBnd:\t0000000000000000');
    expect(status).toContain('CapAmb:\t0000000000000000');
    expect(status).toContain('NoNewPrivs:\t1');

    // The host's view of the same processes: neither uid nor gid is root, and the two sandboxes
    // run as different uids, which own their workspaces.
    const ownPid = await runnerPid(own);
    const otherPid = await runnerPid(other);
    const ownUids = hostStatus(ownPid).Uid!.split('\t');
    const otherUids = hostStatus(otherPid).Uid!.split('\t');
    for (const uid of [...ownUids, ...hostStatus(ownPid).Gid!.split('\t')]) expect(uid).not.toBe('0');
    expect(otherUids[0]).not.toBe(ownUids[0]);
    expect(statSync(join(own.dir, 'workspace')).uid).toBe(Number(ownUids[0]));
    expect(statSync(join(other.dir, 'workspace')).uid).toBe(Number(otherUids[0]));
    expect(statSync(join(other.dir, 'workspace')).mode & 0o077).toBe(0);
    // The daemon stops itself when the server is gone for longer than the lease TTL (the default).
    expect(await inside(own, 'echo "$SINGULACOMP_CONTROL_PLANE_TIMEOUT_MS"')).toBe('180000\nexit:0\n');
    // Its own session: not the one of the process the server launched.
    const entryPid = Number(readFileSync(join(own.dir, 'entry.pid'), 'utf8'));
    expect(sessionOf(ownPid)).not.toBe(sessionOf(entryPid));
  });

  test('cannot mount, unmount or unshare, so read-only binds and the data dir’s cover stay put', async () => {
    const [own] = boxes as [Box];
    const egressMark = join(localRunDir(own.dir), 'egress', 'pwned');
    const attacks = {
      unshareMount: 'unshare -m true',
      unshareUser: 'unshare -Urm true',
      remountEgress: 'mount -o remount,bind,rw /run/singulacomp/egress',
      remountEgressInNewNs: `unshare -m sh -c 'mount -o remount,bind,rw /run/singulacomp/egress && touch /run/singulacomp/egress/pwned'`,
      remountUsr: 'mount -o remount,bind,rw /usr',
      remountApp: `unshare -m sh -c 'mount -o remount,bind,rw ${APP_ROOT}'`,
      umountDataDir: `umount -l ${t.dataDir}`,
      umountDataDirInNewNs: `unshare -m sh -c 'umount -l ${t.dataDir} && cat ${join(t.dataDir, 'bootstrap-token')}'`,
    };
    for (const [name, script] of Object.entries(attacks)) {
      const output = await inside(own, script);
      expect(output, name).not.toMatch(/exit:0\n$/);
      expect(output, name).not.toContain('singulacomp_pat_');
    }
    expect(existsSync(egressMark)).toBe(false);
    // The data dir is still covered after the attempts.
    const after = await inside(own, `ls -A ${t.dataDir}; cat ${join(t.dataDir, 'bootstrap-token')}`);
    expect(after).not.toContain('bootstrap-token\n');
    expect(after).not.toContain('singulacomp_pat_');
    expect(after).not.toMatch(/exit:0\n$/);
  });

  test('cannot write /proc/sys (kernel.core_pattern), directly or after a remount', async () => {
    const [own] = boxes as [Box];
    // Writes back the value it read: on a host where the write got through, nothing changes.
    const direct = await inside(
      own,
      'v=$(cat /proc/sys/kernel/core_pattern) && printf "%s\\n" "$v" > /proc/sys/kernel/core_pattern',
    );
    expect(direct).not.toMatch(/exit:0\n$/);
    const remounted = await inside(
      own,
      `unshare -m sh -c 'mount -o remount,bind,rw /proc/sys && v=$(cat /proc/sys/kernel/core_pattern) && printf "%s\\n" "$v" > /proc/sys/kernel/core_pattern'`,
    );
    expect(remounted).not.toMatch(/exit:0\n$/);
  });

  test('writes only to its workspace, home and tmp', async () => {
    const [own] = boxes as [Box];
    const home = join(own.dir, 'home');
    const allowed = await inside(
      own,
      `touch ./w.txt && touch ${home}/h.txt && touch /tmp/t.txt && echo written`,
    );
    expect(allowed).toBe('written\nexit:0\n');
    for (const target of [
      '/usr/pwned',
      '/etc/pwned',
      '/pwned',
      join(APP_ROOT, 'pwned'),
      '/run/singulacomp/egress/pwned',
    ]) {
      const output = await inside(own, `touch ${target}`);
      expect(output, target).not.toMatch(/exit:0\n$/);
    }
    expect(existsSync(join(APP_ROOT, 'pwned'))).toBe(false);
  });

  test('sees of the product only the daemon bundle and the CLI, never the checkout, its .git or the data dir', async () => {
    const [own, other] = boxes as [Box, Box];
    // On the host each of these exists.
    const hidden = [
      join(APP_ROOT, '.git'),
      join(APP_ROOT, 'package.json'),
      join(APP_ROOT, 'server', 'app.ts'),
      join(APP_ROOT, 'node_modules', 'graphql'),
      join(APP_ROOT, 'prisma'),
      join(t.dataDir, 'bootstrap-token'),
      join(t.dataDir, 'secret.key'),
      join(other.dir, 'workspace', 'README.md'),
      join(other.dir, 'sandbox.json'),
    ].filter((path) => existsSync(path));
    expect(hidden.length).toBeGreaterThanOrEqual(7);
    const output = await inside(
      own,
      hidden.map((path) => `test -e ${path} && echo "visible ${path}"`).join('\n'),
    );
    expect(output).not.toContain('visible');
    const visible = await inside(
      own,
      `test -r ${join(APP_ROOT, 'dist', 'singulacomp-agent.mjs')} && command -v singulacomp && singulacomp --help`,
    );
    expect(visible).toMatch(/exit:0\n$/);
    // The checkout's top level holds nothing but the parents of what is bound (.data: this test's
    // data dir, whose cover hides the sandboxes' directories).
    const listing = await inside(own, `ls -A ${APP_ROOT}`);
    const entries = listing.trim().split('\n').slice(0, -1).sort();
    const parents = ['.data', '.tools', 'cli', 'dist', 'node_modules', 'resolvers'];
    expect(
      entries.every((entry) => parents.includes(entry)),
      listing,
    ).toBe(true);
    const modules = await inside(own, `ls -A ${join(APP_ROOT, 'node_modules')}`);
    expect(
      modules
        .trim()
        .split('\n')
        .slice(0, -1)
        .every((name) => name.startsWith('opencode-')),
      modules,
    ).toBe(true);
    expect(readdirSync(APP_ROOT).length).toBeGreaterThan(entries.length);
  });

  test('another sandbox’s workspace is unreadable from this one', async () => {
    const [own, other] = boxes as [Box, Box];
    mkdirSync(join(other.dir, 'workspace', 'secret'), { recursive: true });
    writeFileSync(join(other.dir, 'workspace', 'secret', 'note.txt'), 'neighbour secret\n');
    const output = await inside(
      own,
      [
        `cat ${join(other.dir, 'workspace', 'secret', 'note.txt')}`,
        `ls ${join(other.dir, 'workspace')}`,
        `unshare -m sh -c 'umount -l ${t.dataDir}; cat ${join(other.dir, 'workspace', 'secret', 'note.txt')}'`,
      ].join('; '),
    );
    expect(output).not.toContain('neighbour secret');
    expect(output).not.toContain('README.md');
    expect(output).not.toMatch(/exit:0\n$/);
  });
});
