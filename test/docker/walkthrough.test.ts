// A session on DOCKER end to end, against rootful Podman: the template's image (FROM the local base
// image) is built through the Engine API with the runtime layer, the real daemon and OpenCode boot
// in a hardened container, a turn goes through the server's LLM gateway to the stub model, the
// telemetry shows the container's memory limit, a second session reuses the image, and stopping the
// session leaves no container behind.
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { AgentSessionDocument, SendMessageDocument, StopSessionDocument } from '../generated/graphql';
import { startSession } from '../leases/helpers';
import { waitFor } from '../support/wait';
import { type DockerE2e, startDockerE2e } from './helpers';

const MEMORY_GIB = 2;

describe('a DOCKER session from create to stop', () => {
  let e: DockerE2e;

  beforeAll(async () => {
    e = await startDockerE2e({ memoryGiB: MEMORY_GIB });
  });

  afterAll(async () => {
    await e?.stop();
  });

  test('create → RUNNING → agent ready → a turn through the gateway → stop, container gone; the image is reused', async ({
    onTestFailed,
  }) => {
    const { t, provider, podman, stub, projectId } = e;
    const s = await startSession(t, projectId);
    const db = t.app.services.db;
    const sandbox = await db.sandbox.findUniqueOrThrow({
      where: { id: s.sandboxId },
      include: { snapshot: true },
    });
    onTestFailed(async () => {
      const logs = await provider.docker
        .getContainer(sandbox.providerSandboxId ?? '')
        .logs({ stdout: true, stderr: true, tail: 80 })
        .catch((e: unknown) => String(e));
      console.error(`container log:\n${String(logs)}`);
    });
    expect(sandbox.provider).toBe('DOCKER');
    expect(sandbox.snapshot?.status).toBe('ACTIVE');
    expect(sandbox.snapshot?.providerRef).toBe(`localhost/singulacomp-snapshot:${sandbox.snapshot?.key}`);
    expect(sandbox.snapshot?.buildLog).toMatch(/COPY README\.md \/opt\/readme\.md/);
    expect(provider.built).toHaveLength(1);

    await waitFor(
      async () => {
        const v = await t.request(AgentSessionDocument, { id: s.sessionId });
        return v.data?.session?.sandbox?.runtimeState === 'HEALTHY';
      },
      120_000,
      'the daemon in the container reports HEALTHY',
    );

    // Telemetry reads the container's cgroup: the template's memory, not the host's.
    const sample = await waitFor(
      () => db.telemetrySample.findFirst({ where: { sandboxId: s.sandboxId }, orderBy: { id: 'desc' } }),
      60_000,
      'a telemetry sample',
    );
    expect(sample.memoryLimitBytes).toBe(MEMORY_GIB * 1024 ** 3);

    stub.setReply('hello from the container');
    const before = stub.requests.length;
    const sent = await t.request(SendMessageDocument, {
      input: { sessionId: s.sessionId, text: 'Say hello.' },
    });
    expect(sent.data?.sendMessage.__typename).toBe('SendMessageSuccess');
    await waitFor(
      () => stub.requests.length > before,
      90_000,
      'the model call reaches the stub through the gateway',
    );
    // The upstream key is the server's: the sandbox's request carried only its own token.
    expect(JSON.stringify(stub.requests.at(-1))).toContain('sk-server-held');

    // A second session of the same template boots from the same image without a build.
    const second = await startSession(t, projectId);
    const secondSandbox = await db.sandbox.findUniqueOrThrow({ where: { id: second.sandboxId } });
    expect(secondSandbox.snapshotId).toBe(sandbox.snapshotId);
    expect(provider.built).toHaveLength(1);

    for (const session of [s, second]) {
      const stopped = await t.request(StopSessionDocument, { input: { sessionId: session.sessionId } });
      expect(stopped.data?.stopSession.__typename).toBe('StopSessionSuccess');
    }
    for (const row of [sandbox, secondSandbox]) {
      await waitFor(
        async () =>
          (await podman.api('GET', `/v1.41/containers/${row.providerSandboxId}/json`)).status === 404,
        60_000,
        `container of sandbox ${row.id} removed`,
      );
    }
  });
});
