// DOCKER sandboxes on rootful Podman (R-DOCK-1): createSession → the daemon in its container reports
// HEALTHY (OpenCode answers), with the template's image already built (the first session builds it
// and is not counted), against the bare engine doing the same boot: `podman run` of that same image
// with the same limits, ulimits and hardening, starting `opencode serve` with the same offline
// environment and polling its /global/health from inside the container until it answers. The
// ratio is what the platform adds on top of "a container with OpenCode in it".
//
// Our path is split into phases: the mutation, the image check (create() inspecting the cached
// image), the workspace clone, the container's create and start calls, the rest of provider.create
// (directories, chown, bridges), then in the container the bridge and the daemon up to its first
// runtime report, and OpenCode's start until HEALTHY.
// BENCH_DOCKER_RUNS sets the runs (median; default 5). Needs podman, runc and debootstrap.
import { spawn } from 'node:child_process';
import type Docker from 'dockerode';
import { SANDBOX_HOME } from '../resolvers/providers/docker';
import { OFFLINE_OPENCODE_ENV } from '../test/fixtures/opencode-project';
import { CreateSessionDocument, StopSessionDocument } from '../test/generated/graphql';
import { startDockerE2e } from '../test/docker/helpers';
import { PODMAN_ULIMITS } from '../test/support/podman';
import { type BenchResult, percentile, round, runIfMain } from './support/harness';

const RUNS = Number(process.env.BENCH_DOCKER_RUNS ?? 5);
const POLL_MS = 20;
const MEMORY_GIB = 2;
const CPUS = 1;
const READY_STATES = new Set(['HEALTHY', 'IDLE', 'BUSY']);

/** Inside the bare container: spawn OpenCode, poll its health every 20 ms, print "ready". */
const BARE_BOOT = `
const { spawn } = require('node:child_process');
const oc = spawn('opencode', ['serve', '--port', '4096', '--hostname', '127.0.0.1'], { stdio: 'ignore' });
const poll = () => fetch('http://127.0.0.1:4096/global/health', { signal: AbortSignal.timeout(1000) })
  .then((r) => (r.ok ? (console.log('ready'), oc.kill('SIGKILL'), process.exit(0)) : retry()), retry);
function retry() { setTimeout(poll, ${POLL_MS}); }
poll();
`;

/**
 * Wall clock of `podman run --rm` of `image` with our container's limits and hardening until
 * OpenCode inside it answers its health route.
 */
function bareRun(image: string, containersConf: string): Promise<number> {
  return new Promise((resolve, reject) => {
    const startedAt = performance.now();
    const env = { ...OFFLINE_OPENCODE_ENV, HOME: SANDBOX_HOME };
    const child = spawn(
      'podman',
      [
        '--runtime',
        'runc',
        'run',
        '--rm',
        '--network',
        'none',
        `--memory=${MEMORY_GIB}g`,
        `--memory-swap=${MEMORY_GIB}g`,
        `--cpus=${CPUS}`,
        '--pids-limit=1024',
        ...PODMAN_ULIMITS.flatMap((u) => ['--ulimit', `${u.Name}=${u.Soft}:${u.Hard}`]),
        '--cap-drop=ALL',
        '--security-opt=no-new-privileges',
        '--read-only',
        '--tmpfs=/tmp:rw,nosuid,nodev,size=1g',
        `--tmpfs=${SANDBOX_HOME}:rw,size=1g,mode=1777`,
        '--user=1000:1000',
        '--workdir=/tmp',
        ...Object.entries(env).flatMap(([k, v]) => ['-e', `${k}=${v}`]),
        image,
        'node',
        '-e',
        BARE_BOOT,
      ],
      { env: { ...process.env, CONTAINERS_CONF: containersConf }, stdio: ['ignore', 'pipe', 'pipe'] },
    );
    let at: number | null = null;
    let err = '';
    child.stdout.on('data', (chunk: Buffer) => {
      if (at === null && chunk.toString().includes('ready')) at = performance.now() - startedAt;
    });
    child.stderr.on('data', (chunk: Buffer) => {
      err += chunk.toString();
    });
    child.on('exit', (code) => (at !== null ? resolve(at) : reject(new Error(`podman run: ${code} ${err}`))));
  });
}

interface Timeline {
  answered: number;
  running: number;
  daemon: number;
  ready: number;
  imageCheck: number;
  clone: number;
  create: number;
  containerCreate: number;
  containerStart: number;
}

/** Adds `ms` to `slot` of the session being measured. */
type Clock = (slot: keyof Timeline, ms: number) => void;

/** Wraps `object[method]` so each call's duration goes to `slot`. */
function timed<T extends object>(object: T, method: keyof T, slot: keyof Timeline, clock: () => Clock): void {
  const original = object[method] as unknown as (...args: unknown[]) => Promise<unknown>;
  (object as Record<keyof T, unknown>)[method] = async function (this: unknown, ...args: unknown[]) {
    const startedAt = performance.now();
    try {
      return await original.apply(this, args);
    } finally {
      clock()(slot, performance.now() - startedAt);
    }
  };
}

export async function run(): Promise<BenchResult[]> {
  const e = await startDockerE2e({ memoryGiB: MEMORY_GIB });
  try {
    const { t, projectId, provider } = e;
    const db = t.app.services.db;
    let current: Partial<Timeline> = {};
    const clock = (): Clock => (slot, ms) => {
      current[slot] = (current[slot] ?? 0) + ms;
    };
    timed(provider, 'create', 'create', clock);
    const options = provider['options'];
    if (options.clone) timed(options, 'clone', 'clone', clock);
    const docker = provider.docker;
    // The cached image is checked in create() (an inspect); a build would go through buildSnapshot.
    const getImage = docker.getImage.bind(docker);
    docker.getImage = (name: string) => {
      const image = getImage(name);
      timed(image, 'inspect', 'imageCheck', clock);
      return image;
    };
    const createContainer = docker.createContainer.bind(docker);
    docker.createContainer = async (opts: Docker.ContainerCreateOptions) => {
      const startedAt = performance.now();
      const container = await createContainer(opts);
      clock()('containerCreate', performance.now() - startedAt);
      timed(container, 'start', 'containerStart', clock);
      return container;
    };

    const session = async (): Promise<{ timeline: Timeline; id: string }> => {
      current = { imageCheck: 0, clone: 0, create: 0, containerCreate: 0, containerStart: 0 };
      const startedAt = performance.now();
      const res = await t.request(CreateSessionDocument, { input: { projectId } });
      if (res.data?.createSession.__typename !== 'CreateSessionSuccess') throw new Error(JSON.stringify(res));
      const id = res.data.createSession.session.sessionId;
      current.answered = performance.now() - startedAt;
      const deadline = Date.now() + 300_000;
      while (current.ready === undefined) {
        const s = await db.session.findUnique({ where: { id }, include: { sandbox: true } });
        if (s?.status === 'FAILED') throw new Error(`session failed: ${s.failureReason}`);
        const at = performance.now() - startedAt;
        if (s?.status === 'RUNNING') current.running ??= at;
        if (current.running !== undefined && s?.sandbox?.runtimeState) current.daemon ??= at;
        if (current.daemon !== undefined && READY_STATES.has(s?.sandbox?.runtimeState ?? ''))
          current.ready ??= at;
        if (Date.now() > deadline) throw new Error('timed out waiting for the agent to be ready');
        if (current.ready === undefined) await new Promise((resolve) => setTimeout(resolve, POLL_MS));
      }
      return { timeline: current as Timeline, id };
    };
    const stop = async (id: string) => {
      const stopped = await t.request(StopSessionDocument, { input: { sessionId: id } });
      if (stopped.data?.stopSession.__typename !== 'StopSessionSuccess')
        throw new Error(JSON.stringify(stopped));
      const sandbox = await db.sandbox.findFirstOrThrow({ where: { sessionId: id } });
      // The next run starts on an engine without this container (stop removes it).
      const deadline = Date.now() + 120_000;
      while (
        (await e.podman.api('GET', `/v1.41/containers/${sandbox.providerSandboxId}/json`)).status !== 404
      ) {
        if (Date.now() > deadline) throw new Error('the stopped container was not removed');
        await new Promise((resolve) => setTimeout(resolve, 100));
      }
    };

    // The first session builds the image; it is not measured.
    const first = await session();
    await stop(first.id);
    const sandbox = await db.sandbox.findFirstOrThrow({
      where: { sessionId: first.id },
      include: { snapshot: true },
    });
    const image = sandbox.snapshot?.providerRef;
    if (!image) throw new Error('the first session has no image');

    const ours: Timeline[] = [];
    const bare: number[] = [];
    for (let i = 0; i < RUNS; i++) {
      const s = await session();
      ours.push(s.timeline);
      process.stderr.write(`docker-sandbox run ${i + 1}: ${JSON.stringify(s.timeline)}\n`);
      await stop(s.id);
      bare.push(await bareRun(image, e.podman.containersConf));
      process.stderr.write(`docker-sandbox bare ${i + 1}: ${Math.round(bare.at(-1) ?? 0)} ms\n`);
    }
    const p50 = (pick: (t: Timeline) => number) => round(percentile(ours.map(pick), 50), 0);
    const phase = (name: string, pick: (t: Timeline) => number): BenchResult => ({
      name: `DOCKER readiness: ${name} p50`,
      value: p50(pick),
      unit: 'ms',
    });
    return [
      {
        name: 'DOCKER createSession → agent HEALTHY (image cached)',
        value: p50((t) => t.ready),
        unit: 'ms',
        baseline: round(percentile(bare, 50), 0),
        note: `median of ${RUNS}; baseline = \`podman run\` of the same image, limits and hardening until \`opencode serve\` inside answers`,
      },
      phase('createSession answered', (t) => t.answered),
      phase('image check (cached image found)', (t) => t.imageCheck),
      phase('workspace clone', (t) => t.clone),
      phase('container create call', (t) => t.containerCreate),
      phase('container start call', (t) => t.containerStart),
      phase(
        'rest of provider.create (dirs, chown; bridges and image check beside the clone)',
        (t) => t.create - t.clone - t.containerCreate - t.containerStart,
      ),
      phase('answered → RUNNING (all provisioning)', (t) => t.running - t.answered),
      phase("RUNNING → the daemon's first report", (t) => t.daemon - t.running),
      phase('first report → OpenCode healthy', (t) => t.ready - t.daemon),
    ];
  } finally {
    await e.stop();
  }
}

runIfMain(import.meta.url, run);
