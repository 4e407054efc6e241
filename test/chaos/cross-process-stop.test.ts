// Any server process can stop any LOCAL sandbox on its host: two processes with separate data dirs
// (each launching into its own directory), sessions created through one and stopped through the
// other. The reconciler stops a sandbox process that no live session owns any more.
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { CreateSessionDocument, StopSessionDocument } from '../generated/graphql';
import { waitFor } from '../support/wait';
import { type ChaosFleet, startChaosFleet } from './fleet';

const SESSIONS = 6;

describe('stopping LOCAL sandboxes from another server process', { timeout: 300_000 }, () => {
  let fleet: ChaosFleet;
  // Sessions are created through the first process and stopped through the second.
  const creator = () => fleet.servers[0];
  const stopper = () => fleet.servers[1];

  beforeAll(async () => {
    fleet = await startChaosFleet({
      name: 'stop',
      markSandboxes: true,
      env: { SINGULACOMP_RECONCILE_INTERVAL_MS: '1000' },
    });
  }, 600_000);

  afterAll(async () => {
    await fleet?.stop();
  });

  async function createRunning(n: number): Promise<string[]> {
    const ids: string[] = [];
    for (let i = 0; i < n; i++) {
      const r = await fleet.post(creator(), CreateSessionDocument, {
        input: { projectId: fleet.projectId, prompt: `stop ${i}` },
      });
      const payload = r.json.data?.createSession as { session?: { sessionId: string } } | undefined;
      if (!payload?.session) throw new Error(JSON.stringify(r.json));
      ids.push(payload.session.sessionId);
    }
    await waitFor(
      async () => {
        const { rows } = await fleet.sql.query<{ n: number }>(
          `SELECT count(*)::int AS n FROM "Session" WHERE id = ANY($1::uuid[]) AND status = 'RUNNING'`,
          [ids],
        );
        return rows[0]?.n === n;
      },
      { timeoutMs: 60_000, intervalMs: 100 },
    );
    return ids;
  }

  test('every sandbox created by one process and stopped through the other has no process left', async () => {
    const ids = await createRunning(SESSIONS);
    expect(fleet.sandboxProcesses()).toHaveLength(SESSIONS);
    for (const id of ids) {
      const r = await fleet.post(stopper(), StopSessionDocument, { input: { sessionId: id } });
      expect(r.json.data?.stopSession).toMatchObject({ __typename: 'StopSessionSuccess' });
    }
    // stopSession returns after the teardown: nothing to wait for.
    expect(fleet.sandboxProcesses()).toEqual([]);
    const { rows } = await fleet.sql.query<{ status: string }>(
      `SELECT s.status::text FROM "Sandbox" s WHERE s."sessionId" = ANY($1::uuid[])`,
      [ids],
    );
    expect(rows.map((r) => r.status)).toEqual(Array(SESSIONS).fill('DESTROYED'));
  });

  test('the reconciler stops a sandbox process whose session is no longer live', async () => {
    const [id] = await createRunning(1);
    expect(fleet.sandboxProcesses()).toHaveLength(1);
    // A teardown that never ran: the session is stopped in the database only.
    await fleet.sql.query(
      `UPDATE "Session" SET status = 'STOPPED', "stopReason" = 'USER' WHERE id = $1::uuid`,
      [id],
    );
    await waitFor(async () => fleet.sandboxProcesses().length === 0, { timeoutMs: 30_000, intervalMs: 100 });
    // The reconciler forgets the process identity once the process is gone (right after the kill).
    const recorded = async () =>
      (
        await fleet.sql.query<{ n: number }>(
          `SELECT count(*)::int AS n FROM "LocalSandboxProcess" WHERE "sessionId" = $1::uuid`,
          [id],
        )
      ).rows[0]?.n;
    await waitFor(async () => (await recorded()) === 0, { timeoutMs: 30_000, intervalMs: 100 });
    expect(await recorded()).toBe(0);
    expect(fleet.sandboxProcesses()).toEqual([]);
  });
});
