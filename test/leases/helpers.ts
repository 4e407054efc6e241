// Sessions on a real server whose sandbox token the test holds, as the daemon would.
import type { SandboxProvider } from '../../resolvers/providers/types';
import { decrypt } from '../../resolvers/auth/crypto';
import { CreateProjectDocument, CreateSessionDocument } from '../generated/graphql';
import type { TestApp } from '../support/app';
import { waitFor } from '../support/wait';

export interface LiveSession {
  sessionId: string;
  sandboxId: string;
  /** The in-sandbox token (SINGULACOMP_TOKEN), read back from the server's encrypted copy. */
  token: string;
}

export async function createProject(
  t: TestApp,
  repositoryUrl: string,
  provider?: 'LOCAL' | 'DAYTONA' | 'E2B' | 'PLATINUM' | 'DOCKER',
): Promise<string> {
  const res = await t.request(CreateProjectDocument, {
    input: { name: `p-${Math.random().toString(36).slice(2)}`, repositoryUrl, provider },
  });
  if (res.data?.createProject.__typename !== 'CreateProjectSuccess') throw new Error(JSON.stringify(res));
  return res.data.createProject.project.id;
}

/** createSession through the API, then waits until it is RUNNING and its token exists. */
export async function startSession(
  t: TestApp,
  projectId: string,
  input: { prompt?: string } = {},
): Promise<LiveSession> {
  const res = await t.request(CreateSessionDocument, { input: { projectId, ...input } });
  if (res.data?.createSession.__typename !== 'CreateSessionSuccess') throw new Error(JSON.stringify(res));
  const sessionId = res.data.createSession.session.sessionId;
  const db = t.app.services.db;
  const sandbox = await waitFor(async () => {
    const session = await db.session.findUnique({ where: { id: sessionId }, include: { sandbox: true } });
    if (session?.status === 'FAILED') throw new Error(`session failed: ${session.failureReason}`);
    return session?.status === 'RUNNING' && session.sandbox?.sandboxTokenEnc ? session.sandbox : null;
  }, 60_000);
  return {
    sessionId,
    sandboxId: sandbox.id,
    token: decrypt(t.app.services.keys.encryption, sandbox.sandboxTokenEnc!),
  };
}

/**
 * Stands in for a cloud provider's API (outside our system): sandboxes exist only in this map and
 * every keepAlive is recorded. `failKeepAlive` makes the provider's keep-alive endpoint fail.
 */
export function recordingProvider(name: 'DAYTONA' | 'E2B' | 'PLATINUM' = 'DAYTONA') {
  const keepAlives: string[] = [];
  const state = { failKeepAlive: false };
  const sandboxes = new Map<string, string>();
  const provider: SandboxProvider = {
    name,
    async create(request) {
      const id = `rec-${request.sandboxId}`;
      sandboxes.set(id, 'STARTED');
      return { providerSandboxId: id, state: 'STARTED', serviceUrl: null };
    },
    async start(id) {
      sandboxes.set(id, 'STARTED');
      return { providerSandboxId: id, state: 'STARTED', serviceUrl: null };
    },
    async stop(id) {
      sandboxes.set(id, 'STOPPED');
      return { providerSandboxId: id, state: 'STOPPED', serviceUrl: null };
    },
    async destroy(id) {
      sandboxes.delete(id);
    },
    async keepAlive(id) {
      keepAlives.push(id);
      if (state.failKeepAlive) throw new Error('provider API answered 503');
    },
    async status(id) {
      return (sandboxes.get(id) as 'STARTED' | 'STOPPED' | undefined) ?? 'DESTROYED';
    },
  };
  return { provider, keepAlives, state };
}
