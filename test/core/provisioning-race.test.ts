// A stop that arrives while the provider is still creating the sandbox wins over provisioning: the
// sandbox just created is stopped and destroyed, the session never becomes RUNNING and keeps the
// stop's reason. Both ends of provisioning are covered: a provider that answers STARTED (the
// session would turn RUNNING) and one that answers while the sandbox still boots (the session
// would wait in the STARTING phase).
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import type { SandboxProvider, SandboxState } from '../../resolvers/providers/types';
import { CreateSessionDocument, StopSessionDocument } from '../generated/graphql';
import { createProject } from '../leases/helpers';
import { type TestApp, startTestApp } from '../support/app';
import { createTestRepo } from '../support/git';
import { deferred, waitFor } from '../support/wait';

/** A provider (outside our system) whose create waits until the test lets it answer. */
function gatedProvider() {
  const created: string[] = [];
  const stopped: string[] = [];
  const destroyed: string[] = [];
  const gate = { answer: 'STARTED' as SandboxState, answered: deferred(), entered: 0 };
  const provider: SandboxProvider = {
    name: 'DAYTONA',
    async create(request) {
      gate.entered += 1;
      await gate.answered.promise;
      gate.answered = deferred();
      const id = `gated-${request.sandboxId}`;
      created.push(id);
      return { providerSandboxId: id, state: gate.answer, serviceUrl: null };
    },
    async start(id) {
      return { providerSandboxId: id, state: 'STARTED', serviceUrl: null };
    },
    async stop(id) {
      stopped.push(id);
      return { providerSandboxId: id, state: 'STOPPED', serviceUrl: null };
    },
    async destroy(id) {
      destroyed.push(id);
    },
    async keepAlive() {},
    async status(id) {
      return destroyed.includes(id) ? 'DESTROYED' : 'STARTED';
    },
  };
  return { provider, gate, created, stopped, destroyed };
}

describe('a stop racing provisioning', () => {
  const cloud = gatedProvider();
  const repo = createTestRepo({ 'README.md': '# race\n' });
  let t: TestApp;
  let projectId: string;

  beforeAll(async () => {
    t = await startTestApp({ providers: [cloud.provider] });
    projectId = await createProject(t, repo.url, 'DAYTONA');
  });
  afterAll(async () => {
    cloud.gate.answered.resolve();
    await t?.stop();
    repo.remove();
  });

  for (const answer of ['STARTED', 'STARTING'] as const) {
    test(`wins when the provider answers ${answer} after the stop`, async () => {
      cloud.gate.answer = answer;
      const entered = cloud.gate.entered;
      const res = await t.request(CreateSessionDocument, { input: { projectId } });
      if (res.data?.createSession.__typename !== 'CreateSessionSuccess') throw new Error(JSON.stringify(res));
      const { id, sessionId } = res.data.createSession.session;
      await waitFor(() => cloud.gate.entered > entered, 30_000, 'the provider create');

      const stop = await t.request(StopSessionDocument, { input: { sessionId: id } });
      expect(stop.data?.stopSession).toMatchObject({ __typename: 'StopSessionSuccess' });
      cloud.gate.answered.resolve();

      const db = t.app.services.db;
      const sandbox = await waitFor(async () => {
        const row = await db.sandbox.findUnique({ where: { sessionId } });
        return row?.status === 'DESTROYED' && row;
      }, 30_000);
      const providerSandboxId = `gated-${sandbox.id}`;
      expect(cloud.created).toContain(providerSandboxId);
      expect(cloud.stopped).toContain(providerSandboxId);
      expect(cloud.destroyed).toContain(providerSandboxId);
      const session = await db.session.findUniqueOrThrow({ where: { id: sessionId } });
      expect(session).toMatchObject({ status: 'STOPPED', stopReason: 'USER', startedAt: null });
      const events = await db.realtimeEvent.findMany({
        where: { topic: 'sessionUpdated', key: sessionId },
        orderBy: { seq: 'asc' },
      });
      expect(events.map((e) => (e.payload as { status: string }).status)).not.toContain('RUNNING');
    }, 60_000);
  }
});
