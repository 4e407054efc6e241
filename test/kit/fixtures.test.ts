// The kit's vitest fixtures against a real server: what a test gets and what is left afterwards.
import { SessionDocument } from '../generated/graphql';
import { expect, test } from '../support/fixtures';
import { waitFor } from '../support/wait';

let stoppedSessionId: string | null = null;

test('the session fixture is a live session of the project fixture, on its own branch', async ({
  app,
  sql,
  project,
  session,
}) => {
  const { rows } = await sql.query<{ projectId: string; status: string }>(
    'SELECT "projectId", status::text FROM "Session" WHERE id = $1',
    [session.sessionId],
  );
  expect(rows).toHaveLength(1);
  expect(['PROVISIONING', 'RUNNING']).toContain(rows[0]!.status);
  expect(project.repo.branches()[session.branchName]).toBe(project.repo.head());
  const res = await app.request(SessionDocument, { id: session.id });
  expect(res.data?.session?.sessionId).toBe(session.sessionId);
  stoppedSessionId = session.sessionId;
});

test('a session fixture is stopped after its test', async ({ app }) => {
  expect(stoppedSessionId).not.toBeNull();
  const stored = await waitFor(async () => {
    const row = await app.app.services.db.session.findUnique({ where: { id: stoppedSessionId! } });
    return row?.status === 'STOPPED' ? row : null;
  });
  expect(stored.status).toBe('STOPPED');
});
