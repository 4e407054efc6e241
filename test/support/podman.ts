// A Docker Engine API on a private unix socket, served by rootful Podman (`podman system service`),
// for tests of the DOCKER provider and of container images. No registry is reachable here, so the
// images the tests build start FROM the local base image (scripts/container/base-image.sh), which
// `baseImage()` builds once and then finds by its content-addressed tag.
//
// Podman runs with the runc runtime (crun refuses this kernel's hybrid cgroup layout) and with
// explicit nofile/nproc ulimits (setrlimit is refused inside containers otherwise), both from a
// containers.conf the helper writes. Storage is Podman's machine-wide one, so the base image is
// shared; containers carry `service.labels` and stop() force-removes every container carrying them
// before it stops the service.
import { type ChildProcess, execFileSync, spawn } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { existsSync, mkdtempSync, readFileSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { request } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { testRunEnv } from './test-run';
import { waitFor } from './wait';

const ROOT = new URL('../..', import.meta.url).pathname;
const BASE_IMAGE_SCRIPT = join(ROOT, 'scripts/container/base-image.sh');

/** The ulimits every container and build step gets (Podman refuses setrlimit without them). */
export const PODMAN_ULIMITS = [
  { Name: 'nofile', Soft: 1024, Hard: 1024 },
  { Name: 'nproc', Soft: 1024, Hard: 1024 },
] as const;

export interface PodmanService {
  /** The API socket. */
  socketPath: string;
  /** `unix://<socketPath>`, the DOCKER_HOST a client uses. */
  dockerHost: string;
  /** Labels to put on every container and image the test creates; stop() removes what carries them. */
  labels: Record<string, string>;
  /** The service's containers.conf (CONTAINERS_CONF for a `podman` CLI call that should match). */
  containersConf: string;
  /** One Docker Engine API call on the socket; the parsed JSON body (or text) and status. */
  api(method: string, path: string, body?: unknown): Promise<{ status: number; body: unknown }>;
  /** Removes the labelled containers and images, stops the service and deletes its directory. */
  stop(): Promise<void>;
}

function apiCall(
  socketPath: string,
  method: string,
  path: string,
  body?: unknown,
): Promise<{ status: number; body: unknown }> {
  return new Promise((resolve, reject) => {
    const payload = body === undefined ? undefined : Buffer.from(JSON.stringify(body));
    const req = request(
      {
        socketPath,
        method,
        path,
        headers: payload ? { 'content-type': 'application/json', 'content-length': payload.length } : {},
      },
      (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (chunk: Buffer) => chunks.push(chunk));
        res.on('end', () => {
          const text = Buffer.concat(chunks).toString('utf8');
          let parsed: unknown = text;
          try {
            parsed = text ? JSON.parse(text) : null;
          } catch {
            // not JSON: keep the text
          }
          resolve({ status: res.statusCode ?? 0, body: parsed });
        });
      },
    );
    req.on('error', reject);
    req.end(payload);
  });
}

/**
 * The local base image's reference (localhost/singulacomp-base:<key>), building it on first use
 * (about a minute: debootstrap, then podman import; later calls find it by its tag).
 */
export function baseImage(): string {
  const out = execFileSync('bash', [BASE_IMAGE_SCRIPT], {
    encoding: 'utf8',
    stdio: ['ignore', 'pipe', 'pipe'],
    timeout: 15 * 60_000,
  });
  const ref = out.trim().split('\n').at(-1);
  if (!ref?.startsWith('localhost/singulacomp-base:'))
    throw new Error(`base-image.sh printed no image reference: ${out}`);
  return ref;
}

export interface StartPodmanOptions {
  /** @default 60_000 */
  startTimeoutMs?: number;
}

/** Starts `podman system service` on a socket in a fresh temporary directory. */
export async function startPodmanService(options: StartPodmanOptions = {}): Promise<PodmanService> {
  if (!existsSync('/usr/bin/podman'))
    throw new Error('podman is not installed (apt-get install podman runc)');
  const dir = mkdtempSync(join(tmpdir(), 'sc-podman-'));
  const socketPath = join(dir, 'podman.sock');
  const containersConf = join(dir, 'containers.conf');
  writeFileSync(
    containersConf,
    [
      '[containers]',
      `default_ulimits = [${PODMAN_ULIMITS.map((u) => `"${u.Name}=${u.Soft}:${u.Hard}"`).join(', ')}]`,
      '[engine]',
      'runtime = "runc"',
      '',
    ].join('\n'),
  );
  const serviceId = randomUUID();
  const labels = { 'singulacomp.test-podman': serviceId };
  const child: ChildProcess = spawn(
    'podman',
    ['--runtime', 'runc', 'system', 'service', '--time=0', `unix://${socketPath}`],
    {
      cwd: dir,
      env: { ...process.env, ...testRunEnv(), CONTAINERS_CONF: containersConf },
      stdio: ['ignore', 'ignore', 'pipe'],
    },
  );
  let stderr = '';
  child.stderr?.on('data', (chunk: Buffer) => {
    stderr = (stderr + chunk.toString('utf8')).slice(-4000);
  });
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  const api = (method: string, path: string, body?: unknown) => apiCall(socketPath, method, path, body);
  try {
    await waitFor(
      async () => child.exitCode === null && (await api('GET', '/_ping')).status === 200,
      { timeoutMs: options.startTimeoutMs ?? 60_000, intervalMs: 100 },
      'podman system service answers /_ping',
    );
  } catch (error) {
    child.kill('SIGKILL');
    await exited;
    rmSync(dir, { recursive: true, force: true });
    throw new Error(`${(error as Error).message}\n${stderr}`);
  }

  let stopped = false;
  return {
    socketPath,
    dockerHost: `unix://${socketPath}`,
    labels,
    containersConf,
    api,
    async stop() {
      if (stopped) return;
      stopped = true;
      if (child.exitCode === null) {
        // Podman's storage is machine-wide and other test files build and remove images meanwhile:
        // a listing may fail or answer an error object; the service process is stopped whatever
        // the clean-up met, or the run would leave it behind.
        try {
          const filters = encodeURIComponent(
            JSON.stringify({ label: Object.entries(labels).map(([k, v]) => `${k}=${v}`) }),
          );
          const listed = await api('GET', `/v1.41/containers/json?all=true&filters=${filters}`).catch(
            () => null,
          );
          for (const container of asList(listed?.body)) {
            await api('DELETE', `/v1.41/containers/${container.Id}?force=true&v=true`).catch(() => {});
          }
          const remaining = await api('GET', '/v1.41/containers/json?all=true').catch(() => null);
          if (Array.isArray(remaining?.body))
            killOrphanExecMonitors(new Set(asList(remaining.body).map((c) => c.Id)));
          const images = await api('GET', `/v1.41/images/json?filters=${filters}`).catch(() => null);
          for (const image of asList(images?.body)) {
            await api('DELETE', `/v1.41/images/${image.Id}?force=true`).catch(() => {});
          }
        } finally {
          child.kill('SIGTERM');
          await exited;
        }
      }
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

/**
 * Podman 4.3 keeps the monitor (conmon) of each exec session into a container waiting out its
 * --exit-delay (300 s) after the container is removed (the test's own, or a sandbox's the DOCKER
 * provider removed): such monitors of containers the engine no longer has are ended, so a run
 * leaves no process behind. Monitors of live containers (other test files') are left alone.
 */
function killOrphanExecMonitors(liveContainerIds: ReadonlySet<string>): void {
  for (const pid of readdirSync('/proc')) {
    if (!/^\d+$/.test(pid)) continue;
    let argv: string[];
    try {
      argv = readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0');
    } catch {
      continue; // gone meanwhile
    }
    const at = argv.indexOf('-c');
    const container = at < 0 ? undefined : argv[at + 1];
    if (!argv[0]?.endsWith('/conmon') || !argv.includes('--exec-attach') || !container) continue;
    if (liveContainerIds.has(container)) continue;
    try {
      process.kill(Number(pid), 'SIGKILL');
    } catch {
      // exited meanwhile
    }
  }
}

/** The Engine's list answer, or nothing when it answered an error object instead of a list. */
function asList(body: unknown): { Id: string }[] {
  return Array.isArray(body) ? (body as { Id: string }[]) : [];
}
