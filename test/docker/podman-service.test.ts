// The container test infrastructure itself: the local base image (Debian minbase, git,
// ca-certificates, Node.js 24) runs under the private Podman service with the limits a sandbox
// relies on enforced, and stop() leaves no container behind.
import Docker from 'dockerode';
import { afterAll, beforeAll, expect, test } from 'vitest';
import { baseImage, PODMAN_ULIMITS, type PodmanService, startPodmanService } from '../support/podman';

let podman: PodmanService;
let image: string;

beforeAll(async () => {
  image = baseImage();
  podman = await startPodmanService();
});

afterAll(async () => {
  await podman?.stop();
});

async function runIn(docker: Docker, cmd: string[], hostConfig: Docker.HostConfig = {}): Promise<string> {
  const container = await docker.createContainer({
    Image: image,
    Cmd: cmd,
    Labels: podman.labels,
    HostConfig: { Ulimits: [...PODMAN_ULIMITS], ...hostConfig },
  });
  await container.start();
  const result = (await container.wait()) as { StatusCode: number };
  const logs = (await container.logs({ stdout: true, stderr: true })) as Buffer;
  await container.remove({ force: true });
  // The log stream is multiplexed: 8-byte frame headers before each chunk.
  const chunks: Buffer[] = [];
  for (let offset = 0; offset + 8 <= logs.length; ) {
    const size = logs.readUInt32BE(offset + 4);
    chunks.push(logs.subarray(offset + 8, offset + 8 + size));
    offset += 8 + size;
  }
  const text = Buffer.concat(chunks).toString('utf8');
  expect(result.StatusCode, text).toBe(0);
  return text;
}

test('the base image runs Node.js 24 and git under a memory limit the container sees', async () => {
  const docker = new Docker({ socketPath: podman.socketPath });
  const version = (await docker.version()) as { ApiVersion: string };
  expect(Number(version.ApiVersion)).toBeGreaterThanOrEqual(1.4);

  const out = await runIn(
    docker,
    [
      'sh',
      '-c',
      'node --version; git --version; cat /sys/fs/cgroup/memory/memory.limit_in_bytes 2>/dev/null || cat /sys/fs/cgroup/memory.max; ls /etc/ssl/certs/ca-certificates.crt',
    ],
    { Memory: 96 * 1024 * 1024 },
  );
  const [node, git, limit, certs] = out.trim().split('\n');
  expect(node).toMatch(/^v24\./);
  expect(git).toMatch(/^git version 2\./);
  expect(Number(limit)).toBe(96 * 1024 * 1024);
  expect(certs).toBe('/etc/ssl/certs/ca-certificates.crt');
});

test('stop() removes the containers that carry the service labels', async () => {
  const other = await startPodmanService();
  const docker = new Docker({ socketPath: other.socketPath });
  const container = await docker.createContainer({
    Image: image,
    Cmd: ['sleep', '600'],
    Labels: other.labels,
    HostConfig: { Ulimits: [...PODMAN_ULIMITS] },
  });
  await container.start();
  const id = container.id;
  await other.stop();
  const check = await podman.api('GET', `/v1.41/containers/${id}/json`);
  expect(check.status).toBe(404);
});
