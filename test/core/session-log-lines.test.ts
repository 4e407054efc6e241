// Info-level server log lines a newcomer reads (R-REC-2): session created, ready, stopped and
// failed, each with the request id that caused it, also when a provisioning job logs it later.
import { afterAll, beforeAll, expect, test } from 'vitest';
import { createLogger } from '../../server/logger';
import { CreateProjectDocument } from '../generated/graphql';
import { type TestApp, startTestApp } from '../support/app';
import { type TestRepo, createTestRepo } from '../support/git';
import { waitFor } from '../support/wait';

const lines: Array<Record<string, unknown>> = [];
let t: TestApp;
let repo: TestRepo;

beforeAll(async () => {
  const destination = {
    write(line: string) {
      lines.push(JSON.parse(line) as Record<string, unknown>);
    },
  };
  repo = createTestRepo();
  t = await startTestApp({ logger: createLogger('info', { format: 'json', destination }) });
});
afterAll(async () => {
  await t?.stop();
  repo?.remove();
});

const CREATE = `mutation ($input: CreateSessionInput!) { createSession(input: $input) {
  __typename ... on CreateSessionSuccess { session { sessionId } } } }`;
const STOP = `mutation ($input: StopSessionInput!) { stopSession(input: $input) { __typename } }`;

test('a session created, ready and stopped is logged at info with the request ids that caused it', async () => {
  const project = await t.request(CreateProjectDocument, {
    input: { name: 'logs', repositoryUrl: repo.url },
  });
  const projectId =
    project.data?.createProject.__typename === 'CreateProjectSuccess'
      ? project.data.createProject.project.id
      : '';
  const created = await t.raw({ query: CREATE, variables: { input: { projectId } } }, undefined, {
    'x-request-id': 'req-create-1',
  });
  const sessionId = (created.data as { createSession: { session: { sessionId: string } } }).createSession
    .session.sessionId;
  const line = (msg: string) => lines.find((l) => l.msg === msg && l.sessionId === sessionId);
  await waitFor(() => line('session ready'), 60_000, 'the session ready line');
  const stopped = await t.raw({ query: STOP, variables: { input: { sessionId } } }, undefined, {
    'x-request-id': 'req-stop-1',
  });
  expect((stopped.data as { stopSession: { __typename: string } }).stopSession.__typename).toBe(
    'StopSessionSuccess',
  );
  expect(line('session created')).toMatchObject({ level: 30, requestId: 'req-create-1', baseRef: 'main' });
  expect(line('session ready')).toMatchObject({ level: 30, requestId: 'req-create-1', provider: 'LOCAL' });
  expect(line('session stopped')).toMatchObject({ level: 30, requestId: 'req-stop-1', stopReason: 'USER' });
});
