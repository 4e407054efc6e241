// The memory guard acting on a DOCKER container's real limit: the daemon reads the container's
// cgroup (the template's 1 GiB, the smallest a template can ask for, not the host's memory), a turn
// is in flight (the stub holds its reply), a process in the container allocates past the guard's
// threshold, and the daemon aborts the turn with a SandboxMemoryGuard error whose numbers carry
// that limit.
//
// The hog fills up to a target between the guard's threshold and the limit, measured on the
// container's own cgroup, and then holds it: a fixed-size hog (680 MiB beside OpenCode and the
// daemon) could overshoot to the limit, the kernel's OOM killer then took the hog before the
// guard's next sample (a sampling timer runs late on a loaded machine) and usage fell back below
// the threshold, so the guard never tripped. Topped up to the target, usage stays above the
// threshold and below the OOM line for as long as the guard needs, however late it samples.
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { AgentSessionDocument, SendMessageDocument } from '../generated/graphql';
import { startSession } from '../leases/helpers';
import { waitFor } from '../support/wait';
import { type DockerE2e, startDockerE2e } from './helpers';

const LIMIT = 1024 ** 3;
const GUARD_PCT = 60;
/** What the hog fills the container's usage up to: above the guard, well below the limit. */
const TARGET_PCT = 75;

/**
 * Allocates touched 8 MiB buffers until the container's cgroup usage reaches the target, checks
 * again every 100 ms (page cache reclaimed lowers usage), and prints what it holds.
 */
const HOG = `
const fs = require('node:fs');
const files = ['/sys/fs/cgroup/memory.current', '/sys/fs/cgroup/memory/memory.usage_in_bytes'];
const usage = () => {
  for (const f of files) { try { return Number(fs.readFileSync(f, 'utf8')); } catch {} }
  throw new Error('no cgroup memory usage file');
};
const target = Number(process.argv[1]);
const held = [];
const fill = () => {
  while (usage() < target) held.push(Buffer.alloc(8 * 2 ** 20, 1));
};
fill();
console.log('filled', held.length * 8, 'MiB, usage', usage());
setInterval(fill, 100);
`;

describe('the memory guard in a DOCKER sandbox', () => {
  let e: DockerE2e;

  beforeAll(async () => {
    e = await startDockerE2e({
      memoryGiB: LIMIT / 1024 ** 3,
      env: { SINGULACOMP_MEMORY_GUARD_PCT: String(GUARD_PCT), SINGULACOMP_MEMORY_SAMPLE_MS: '250' },
    });
  });

  afterAll(async () => {
    await e?.stop();
  });

  test('a busy turn is aborted with SandboxMemoryGuard at the container limit', {
    timeout: 900_000,
  }, async ({ onTestFailed }) => {
    const { t, provider, stub, projectId } = e;
    const s = await startSession(t, projectId);
    const sandbox = await t.app.services.db.sandbox.findUniqueOrThrow({ where: { id: s.sandboxId } });
    const container = provider.docker.getContainer(sandbox.providerSandboxId ?? '');
    const hogOutput: Buffer[] = [];
    onTestFailed(async () => {
      const logs = await container
        .logs({ stdout: true, stderr: true, tail: 80 })
        .catch((err: unknown) => String(err));
      console.error(`container log:\n${String(logs)}\nhog:\n${Buffer.concat(hogOutput).toString('utf8')}`);
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
      // The turn reached the model: OpenCode holds it open, so it is in flight when the guard samples.
      await waitFor(() => stub.requests.length > 0, 60_000, 'the model call reaches the stub');

      const exec = await container.exec({
        Cmd: ['node', '-e', HOG, String(Math.round((LIMIT * TARGET_PCT) / 100))],
        User: '1000:1000',
        AttachStdout: true,
        AttachStderr: true,
      });
      const hog = await exec.start({});
      hog.on('data', (chunk: Buffer) => hogOutput.push(chunk));
      try {
        const error = await waitFor(
          async () => {
            const sb = await view();
            return sb?.error?.includes('SandboxMemoryGuard') ? sb.error : null;
          },
          60_000,
          'the SandboxMemoryGuard error',
        );
        // The hog was never killed: it still runs, holding usage at its target.
        expect((await exec.inspect()).Running, Buffer.concat(hogOutput).toString('utf8')).toBe(true);
        const numbers = /memory at ([\d.]+)% \(used (\d+) of (\d+) bytes\) reached the (\d+)% guard/.exec(
          error,
        );
        expect(numbers, error).not.toBeNull();
        const [, pct, used, limit, threshold] = numbers ?? [];
        expect(Number(limit)).toBe(LIMIT);
        expect(Number(threshold)).toBe(GUARD_PCT);
        expect(Number(used)).toBeGreaterThanOrEqual((LIMIT * GUARD_PCT) / 100);
        expect(Number(used)).toBeGreaterThan(before.memoryUsedBytes);
        expect(Number(used)).toBeLessThanOrEqual(LIMIT);
        expect(Number(pct)).toBeGreaterThanOrEqual(GUARD_PCT);
        // The turn was aborted: the daemon no longer reports it busy.
        await waitFor(async () => (await view())?.runtimeState !== 'BUSY', 60_000, 'the turn ends');
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
        expect(Number(guardSample.memoryUsedBytes)).toBeGreaterThanOrEqual((LIMIT * GUARD_PCT) / 100);
      } finally {
        hog.destroy();
      }
    } finally {
      release();
    }
  });
});
