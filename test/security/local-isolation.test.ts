// Attack 1: from inside a real, isolated LOCAL sandbox (its entry command runs with the environment
// a daemon gets), nothing of the server or of a neighbouring sandbox is readable or reachable,
// while its own workspace and the API are.
import { existsSync, readFileSync, renameSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, afterEach, beforeAll, describe, expect, test } from 'vitest';
import { bwrapAvailable } from '../../resolvers/providers/local-isolation';
import { type TestApp, startTestApp } from '../support/app';
import { createTestRepo } from '../support/git';
import { waitFor } from '../support/wait';
import { type RunningSandbox, runningSandboxes } from './fixtures/running-sandboxes';

// The probe is committed to the sandbox's repository: a sandbox sees nothing of the product's
// checkout (test/ included), only its workspace.
const PROBE = readFileSync(new URL('./fixtures/sandbox-probe.ts', import.meta.url), 'utf8');

interface ProbeResult {
  id: string;
  reads: Record<string, string>;
  ports: Record<string, string>;
  api: string;
  pids: string[];
  hasOwnToken: boolean;
}

type Box = RunningSandbox;

describe('an isolated LOCAL sandbox', () => {
  let t: TestApp;
  const repo = createTestRepo({ 'README.md': '# isolated\n', 'sandbox-probe.ts': PROBE });
  const sandboxes: Box[] = [];

  beforeAll(async () => {
    // The suite exists to prove isolation: a host without working bubblewrap fails it.
    expect(bwrapAvailable()).toBe(true);
    t = await startTestApp({
      env: { SINGULACOMP_LOCAL_ENTRY: 'exec node ./sandbox-probe.ts', SINGULACOMP_LOCAL_ISOLATION: 'bwrap' },
    });
    sandboxes.push(...(await runningSandboxes(t, 'iso', repo.url)));
  });
  afterAll(async () => t?.stop());

  // Whatever step fails, each sandbox's session row and entry log say where it stood.
  afterEach(async ({ task }) => {
    if (task.result?.state !== 'fail') return;
    for (const s of sandboxes) {
      const session = await t.app.services.db.session
        .findUnique({
          where: { id: s.sessionId },
          select: { status: true, stopReason: true, stoppedAt: true },
        })
        .catch((error: unknown) => String(error));
      const log = existsSync(join(s.dir, 'entry.log'))
        ? readFileSync(join(s.dir, 'entry.log'), 'utf8')
        : '(none)';
      console.error(`sandbox ${s.id}: ${JSON.stringify(session)}\nentry log:\n${log.slice(-3_000)}`);
    }
  });

  async function probe(dir: string, paths: string[], ports: number[]): Promise<ProbeResult> {
    const id = `${Date.now()}-${Math.random()}`;
    // Written whole and renamed into place: the probe polls for the file and would otherwise read it
    // half written (it did once on a loaded machine, and the probe, the sandbox's entry, crashed).
    const request = join(dir, 'workspace', 'probe-request.json');
    writeFileSync(`${request}.tmp`, JSON.stringify({ id, paths, ports }));
    renameSync(`${request}.tmp`, request);
    return waitFor(async () => {
      const file = join(dir, 'workspace', 'probe-result.json');
      if (!existsSync(file)) return null;
      const result = JSON.parse(readFileSync(file, 'utf8')) as ProbeResult;
      return result.id === id ? result : null;
    }, 30_000);
  }

  test('cannot read the bootstrap token, the secret key, a neighbour’s files or host processes’ environment', async () => {
    const [own, other] = sandboxes as [Box, Box];
    const neighbourPid = readFileSync(join(other.dir, 'entry.pid'), 'utf8').trim();
    const neighbourConfig = join(other.dir, 'sandbox.json');
    // Preconditions on the host: each target exists and holds what an attacker wants.
    expect(readFileSync(join(t.dataDir, 'bootstrap-token'), 'utf8')).toMatch(/^singulacomp_pat_/);
    expect(readFileSync(neighbourConfig, 'utf8')).toContain('SINGULACOMP_TOKEN');
    expect(readFileSync(`/proc/${neighbourPid}/environ`, 'utf8')).toContain('SINGULACOMP_TOKEN');
    const paths = [
      '../../../bootstrap-token',
      join(t.dataDir, 'bootstrap-token'),
      join(t.dataDir, 'secret.key'),
      neighbourConfig,
      join(other.dir, 'workspace', 'README.md'),
      `/proc/${neighbourPid}/environ`,
      `/proc/${process.pid}/environ`,
      '/etc/shadow',
      '/root/.bash_history',
      'README.md',
    ];
    const result = await probe(own.dir, paths, []);
    // Its own workspace and token: the probe really ran and could read what it should.
    expect(result.reads['README.md']).toBe('read:# isolated\n');
    expect(result.hasOwnToken).toBe(true);
    for (const path of paths.slice(0, -1)) expect(result.reads[path], path).toMatch(/^error:(ENOENT|EACCES)/);
    // Its own PID namespace: only its own few processes, none of the host's.
    expect(result.pids.length).toBeLessThan(10);
    expect(result.pids).not.toContain(String(process.pid));
  });

  test('cannot connect to PostgreSQL, Redis or a neighbour’s service port, but reaches the API', async () => {
    const [own, other] = sandboxes as [Box, Box];
    const neighbourPort = (
      JSON.parse(readFileSync(join(other.dir, 'sandbox.json'), 'utf8')) as { servicePort: number }
    ).servicePort;
    const result = await probe(own.dir, [], [5432, 6379, neighbourPort]);
    expect(result.ports).toEqual({
      5432: 'error:ECONNREFUSED',
      6379: 'error:ECONNREFUSED',
      [neighbourPort]: 'error:ECONNREFUSED',
    });
    expect(result.api).toBe('status:200');
  });

  test('the host reaches the daemon’s service port through the sandbox’s ingress socket', async () => {
    const [own] = sandboxes as [Box];
    const config = JSON.parse(readFileSync(join(own.dir, 'sandbox.json'), 'utf8')) as { servicePort: number };
    // The probe listens on nothing: the bridge accepts and the connection ends without an answer,
    // which proves the path exists (a missing bridge is ECONNREFUSED on the host).
    const outcome = await new Promise<string>((resolve) => {
      fetch(`http://127.0.0.1:${config.servicePort}/`).then(
        (r) => resolve(`status:${r.status}`),
        (error: Error & { cause?: { code?: string } }) =>
          resolve(`error:${error.cause?.code ?? error.message}`),
      );
    });
    expect(outcome).not.toBe('error:ECONNREFUSED');
  });
});
