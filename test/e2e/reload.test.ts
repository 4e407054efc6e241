// reloadSession end to end: the server signs a user-context header with the sandbox token it keeps,
// the real daemon replaces the real OpenCode runtime and reports every phase back. A replacement
// that cannot load its config fails VALIDATE_RUNTIME and the old runtime keeps serving.
import { readFileSync } from 'node:fs';
import { writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { TARGET_PORT_HEADER } from '../../agent/proxy';
import { UNREACHABLE_PORT_STATUS } from '../../contract/ports';
import { USER_CONTEXT_HEADER, signUserContext } from '../../contract/user-context';
import { AgentSessionDocument, ReloadSessionDocument } from '../generated/graphql';
import { OPENCODE_CONFIG_SUBDIR } from '../fixtures/opencode-project';
import { type LiveSession, createProject, startSession } from '../leases/helpers';
import { waitFor } from '../support/wait';
import { E2E_SETUP_TIMEOUT_MS, type E2e, startE2e } from './helpers';

for (const db of ['postgres', 'pglite'] as const) {
  describe(`reloading a session’s runtime through the API on ${db}`, () => {
    let e: E2e;
    let s: LiveSession;
    let serviceUrl: string;
    let workspace: string;
    /** The port the LOCAL provider chose for OpenCode (`--opencode-port` on the daemon's command line). */
    let opencodePort: number;

    beforeAll(async () => {
      e = await startE2e({ db, daemonEnv: { SINGULACOMP_ATTACHMENT_OFFLOAD: '0' } });
      const projectId = await createProject(e.t, e.repo.url);
      s = await startSession(e.t, projectId);
      const sandbox = await e.t.app.services.db.sandbox.findUniqueOrThrow({ where: { id: s.sandboxId } });
      serviceUrl = sandbox.serviceUrl!;
      workspace = join(e.sandboxDir(sandbox.providerSandboxId!), 'workspace');
      // One argument each, or inside the `sh -c` command line of an isolated sandbox.
      const cmdline = readFileSync(`/proc/${await e.daemonPid(sandbox.providerSandboxId!)}/cmdline`, 'utf8');
      opencodePort = Number(/--opencode-port[\0 ]+(\d+)/.exec(cmdline)?.[1]);
      expect(opencodePort).toBeGreaterThan(0);
      await waitFor(async () => {
        const v = await e.t.request(AgentSessionDocument, { id: s.sessionId });
        return v.data?.session?.sandbox?.runtimeState === 'HEALTHY';
      }, 90_000);
    }, E2E_SETUP_TIMEOUT_MS);
    afterAll(async () => e?.stop());

    async function reloadUntilDone(input: { noRepo?: boolean; force?: boolean }) {
      const res = await e.t.request(ReloadSessionDocument, { input: { sessionId: s.sessionId, ...input } });
      if (res.data?.reloadSession.__typename !== 'ReloadSessionSuccess') throw new Error(JSON.stringify(res));
      const id = res.data.reloadSession.reload.id;
      return waitFor(async () => {
        const v = await e.t.request(AgentSessionDocument, { id: s.sessionId });
        const reload = v.data?.session?.reloads.edges.find((edge) => edge.node.id === id)?.node;
        return reload && reload.status !== 'RUNNING' ? reload : null;
      }, 90_000);
    }

    /** A request through the daemon's proxy to whichever OpenCode runtime is current. */
    async function throughProxy(path: string, port?: number): Promise<Response> {
      const header = signUserContext(
        port === undefined
          ? { sessionId: s.sessionId, userId: 'test-user', audience: 'opencode', ttlSeconds: 60 }
          : { sessionId: s.sessionId, userId: 'test-user', audience: 'app', port, ttlSeconds: 60 },
        s.token,
      );
      const headers: Record<string, string> = { [USER_CONTEXT_HEADER]: header };
      if (port !== undefined) headers[TARGET_PORT_HEADER] = String(port);
      return fetch(`${serviceUrl}${path}`, { headers });
    }

    /**
     * OpenCode answers on its configured port, inside the sandbox (an isolated sandbox has its own
     * network): the daemon reports the port its current runtime serves on, and OpenCode answers
     * through the proxy. No preview may reach that port itself (R-PRV-5).
     */
    async function expectOpencodeOnItsPort(): Promise<void> {
      const control = signUserContext(
        { sessionId: s.sessionId, userId: 'test-user', audience: 'control', ttlSeconds: 60 },
        s.token,
      );
      const ports = await fetch(`${serviceUrl}/singulacomp/ports`, {
        headers: { [USER_CONTEXT_HEADER]: control },
      });
      expect(await ports.json()).toMatchObject({ opencode: opencodePort });
      const health = await throughProxy('/global/health');
      expect(health.status).toBe(200);
      expect(await health.json()).toMatchObject({ healthy: true });
      const asApp = await throughProxy('/global/health', opencodePort);
      expect(asApp.status).toBe(UNREACHABLE_PORT_STATUS);
    }

    test('a reload runs every phase on the daemon and ends SUCCEEDED, with OpenCode back on its port', async () => {
      await expectOpencodeOnItsPort();
      const reload = await reloadUntilDone({ noRepo: true });
      expect(reload.status).toBe('SUCCEEDED');
      expect(reload.error).toBeNull();
      expect(reload.finishedAt).not.toBeNull();
      expect(reload.phases.map((p) => `${p.name}:${p.status}`)).toEqual([
        'CHECK_SESSION:STARTED',
        'CHECK_SESSION:SUCCEEDED',
        'COMPILE_AGENT_CONFIG:STARTED',
        'COMPILE_AGENT_CONFIG:SUCCEEDED',
        'APPLY_RUNTIME:STARTED',
        'APPLY_RUNTIME:SUCCEEDED',
        'VALIDATE_RUNTIME:STARTED',
        'VALIDATE_RUNTIME:SUCCEEDED',
        'CONFIRM_CONFIG:STARTED',
        'CONFIRM_CONFIG:SUCCEEDED',
      ]);
      expect((await throughProxy('/session')).status).toBe(200);
      expect(
        reload.phases.find((p) => p.name === 'CONFIRM_CONFIG' && p.status === 'SUCCEEDED')?.message,
      ).toBeNull();
      await expectOpencodeOnItsPort();
    });

    test('a replacement that cannot load its config fails the reload with the reason and the old runtime keeps serving', async () => {
      const before = await (await throughProxy('/config')).json();
      // Valid JSON (so it compiles) that OpenCode's own schema rejects when the replacement boots.
      await writeFile(join(workspace, OPENCODE_CONFIG_SUBDIR, 'opencode.json'), '{ "model": 5 }\n');

      const reload = await reloadUntilDone({ noRepo: true });
      expect(reload.status).toBe('FAILED');
      expect(reload.error).toContain('VALIDATE_RUNTIME');
      expect(reload.error).toContain('ConfigInvalidError');
      expect(reload.phases.at(-1)).toMatchObject({ name: 'VALIDATE_RUNTIME', status: 'FAILED' });
      expect(reload.phases.map((p) => p.name)).not.toContain('CONFIRM_CONFIG');

      // The runtime that was serving before still serves, with the config it loaded.
      const health = await fetch(`${serviceUrl}/singulacomp/health`);
      expect(health.status).toBe(200);
      expect(await health.json()).toMatchObject({ ok: true, sessionId: s.sessionId });
      const config = await throughProxy('/config');
      expect(config.status).toBe(200);
      expect(await config.json()).toEqual(before);
      const session = await e.t.request(AgentSessionDocument, { id: s.sessionId });
      expect(session.data?.session?.status).toBe('RUNNING');
      await expectOpencodeOnItsPort();
    });
  });
}
