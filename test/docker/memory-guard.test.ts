// The memory guard acting on a DOCKER container's real limit: the daemon reads the container's
// cgroup (the template's 1 GiB, not the host's memory), a turn is in flight (the stub holds its
// reply), a process in the container allocates past the guard's threshold, and the daemon aborts the
// turn with a SandboxMemoryGuard error whose numbers carry that limit. The threshold and sampling
// period are the daemon's own variables, set small so the hog stays well below the OOM line.
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { AgentSessionDocument, SendMessageDocument } from '../generated/graphql';
import { startSession } from '../leases/helpers';
import { waitFor } from '../support/wait';
import { type DockerE2e, startDockerE2e } from './helpers';

const LIMIT = 1024 ** 3;
const GUARD_PCT = 60;
const HOG_MIB = 680;

describe('the memory guard in a DOCKER sandbox', () => {
  let e: DockerE2e;

  beforeAll(async () => {
    e = await startDockerE2e({
      memoryGiB: LIMIT / 1024 ** 3,
      env: { SINGULACOMP_MEMORY_GUARD_PCT: String(GUARD_PCT), SINGULACOMP_MEMORY_SAMPLE_MS: '500' },
    });
  });

  afterAll(async () => {
    await e?.stop();
  });

  test('a busy turn is aborted with SandboxMemoryGuard at the container limit', async ({ onTestFailed }) => {
    const { t, provider, stub, projectId } = e;
    const s = await startSession(t, projectId);
    const sandbox = await t.app.services.db.sandbox.findUniqueOrThrow({ where: { id: s.sandboxId } });
    const container = provider.docker.getContainer(sandbox.providerSandboxId ?? '');
    onTestFailed(async () => {
      const logs = await container
        .logs({ stdout: true, stderr: true, tail: 80 })
        .catch((err: unknown) => String(err));
      console.error(`container log:\n${String(logs)}`);
    });
    const view = async () =>
      (await t.request(AgentSessionDocument, { id: s.sessionId })).data?.session?.sandbox;
    await waitFor(async () => (await view())?.runtimeState === 'HEALTHY', 120_000, 'HEALTHY');

    // Before the hog: the container's limit, and usage below the threshold.
    const before = await waitFor(async () => (await view())?.latestTelemetry, 60_000, 'a telemetry sample');
    expect(before.memoryLimitBytes).toBe(LIMIT);
    expect(before.memoryUsedBytes).toBeLessThan((LIMIT * GUARD_PCT) / 100);

    const release = stub.holdReplies();
    try {
      const sent = await t.request(SendMessageDocument, { input: { sessionId: s.sessionId, text: 'Work.' } });
      expect(sent.data?.sendMessage.__typename).toBe('SendMessageSuccess');
      await waitFor(async () => (await view())?.runtimeState === 'BUSY', 60_000, 'the turn BUSY');

      // The hog alone is above the threshold: touched pages, held until the container goes.
      const exec = await container.exec({
        Cmd: [
          'node',
          '-e',
          `const b = Buffer.alloc(${HOG_MIB} * 2 ** 20, 1); setInterval(() => b[0]++, 1000);`,
        ],
        User: '1000:1000',
        AttachStdout: true,
        AttachStderr: true,
      });
      const hog = await exec.start({});
      hog.resume();
      try {
        const error = await waitFor(
          async () => {
            const sb = await view();
            return sb?.error?.includes('SandboxMemoryGuard') ? sb.error : null;
          },
          60_000,
          'the SandboxMemoryGuard error',
        );
        const numbers = /memory at ([\d.]+)% \(used (\d+) of (\d+) bytes\) reached the (\d+)% guard/.exec(
          error,
        );
        expect(numbers, error).not.toBeNull();
        const [, pct, used, limit, threshold] = numbers ?? [];
        expect(Number(limit)).toBe(LIMIT);
        expect(Number(threshold)).toBe(GUARD_PCT);
        // Sampled once the hog pushed usage past the threshold (it may still be filling its buffer):
        // above the line the usage before the hog was below.
        expect(Number(used)).toBeGreaterThanOrEqual((LIMIT * GUARD_PCT) / 100);
        expect(Number(used)).toBeGreaterThan(before.memoryUsedBytes);
        expect(Number(used)).toBeLessThanOrEqual(LIMIT);
        expect(Number(pct)).toBeGreaterThanOrEqual(GUARD_PCT);
        // The turn was aborted: the daemon no longer reports it busy.
        const sb = await view();
        expect(sb?.runtimeState).not.toBe('BUSY');
        // The guard's own telemetry sample carries the container's limit.
        const guardSample = await waitFor(
          () =>
            t.app.services.db.telemetrySample.findFirst({
              where: { sandboxId: s.sandboxId, reason: 'MEMORY_GUARD' },
            }),
          30_000,
          'the MEMORY_GUARD telemetry sample',
        );
        expect(guardSample.memoryLimitBytes).toBe(LIMIT);
      } finally {
        hog.destroy();
      }
    } finally {
      release();
    }
  });
});
