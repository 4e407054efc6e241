// A session on DOCKER end to end, against rootful Podman: the template's image (FROM the local base
// image) is built through the Engine API with the runtime layer, the real daemon and OpenCode boot
// in a hardened container, a turn goes through the server's LLM gateway to the stub model, the
// telemetry shows the container's memory limit, a commit pushed from inside the container lands on
// the session branch upstream through the API's git proxy, reloadSession replaces OpenCode, a
// second session reuses the image, and stopping the sessions leaves no container behind.
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import {
  AgentSessionDocument,
  ReloadSessionDocument,
  SendMessageDocument,
  StopSessionDocument,
} from '../generated/graphql';
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

    // A push on the session branch from inside the container, through the API's git proxy with
    // the sandbox's own token (the CLI's credential helper), lands upstream.
    const branch = (await db.session.findUniqueOrThrow({ where: { id: s.sessionId } })).branchName;
    const cut = e.repo.branches()[branch];
    const exec = await provider.docker.getContainer(sandbox.providerSandboxId ?? '').exec({
      Cmd: [
        'sh',
        '-c',
        'cd /workspace && echo pushed > pushed.txt && git add pushed.txt && git -c user.name=agent -c user.email=agent@example.com commit -q -m "from the container" && git push -q origin HEAD 2>&1',
      ],
      User: '1000:1000',
      AttachStdout: true,
      AttachStderr: true,
    });
    const stream = await exec.start({});
    const output: Buffer[] = [];
    stream.on('data', (chunk: Buffer) => output.push(chunk));
    await new Promise((resolve) => stream.on('end', resolve));
    expect((await exec.inspect()).ExitCode, Buffer.concat(output).toString('utf8')).toBe(0);
    const pushed = await waitFor(
      () => {
        const head = e.repo.branches()[branch];
        return head && head !== cut ? head : null;
      },
      30_000,
      `the session branch ${branch} upstream`,
    );
    expect(e.repo.git(`--git-dir=${e.repo.url}`, 'show', `${pushed}:pushed.txt`)).toBe('pushed');
    expect(e.repo.git(`--git-dir=${e.repo.url}`, 'log', '-1', '--format=%s', pushed)).toBe(
      'from the container',
    );

    // The turn ends: its lease (held while a turn is busy) is released.
    await waitFor(
      async () => {
        const v = await t.request(AgentSessionDocument, { id: s.sessionId });
        return v.data?.session?.lease?.releasedAt ? true : null;
      },
      90_000,
      'the turn ends and releases its lease',
    );

    // reloadSession: the daemon replaces OpenCode inside the container and reports every phase.
    const reloaded = await t.request(ReloadSessionDocument, { input: { sessionId: s.sessionId } });
    expect(reloaded.data?.reloadSession.__typename).toBe('ReloadSessionSuccess');
    const reloadId =
      reloaded.data?.reloadSession.__typename === 'ReloadSessionSuccess'
        ? reloaded.data.reloadSession.reload.id
        : '';
    const reload = await waitFor(
      async () => {
        const v = await t.request(AgentSessionDocument, { id: s.sessionId });
        const node = v.data?.session?.reloads.edges.find((edge) => edge.node.id === reloadId)?.node;
        return node && node.status !== 'RUNNING' ? node : null;
      },
      90_000,
      'the reload finishes',
    );
    expect(reload.status, JSON.stringify(reload)).toBe('SUCCEEDED');

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
