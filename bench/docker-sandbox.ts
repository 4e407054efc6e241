// DOCKER sandboxes on rootful Podman (R-DOCK-1): createSession → the daemon in its container reports
// HEALTHY, with the template's image already built (the first session builds it and is not
// counted), against the bare engine: `podman run` of that same image until a `node -e` inside it
// prints a line. The difference is what the platform adds on top of starting a container: the
// workspace clone, the bridges, the daemon's boot, OpenCode's start and its first report.
// BENCH_DOCKER_RUNS sets the runs (median; default 3). Needs podman, runc and debootstrap.
import { spawn } from 'node:child_process';
import { AgentSessionDocument, CreateSessionDocument, StopSessionDocument } from '../test/generated/graphql';
import { startDockerE2e } from '../test/docker/helpers';
import { waitFor } from '../test/support/wait';
import { type BenchResult, percentile, round, runIfMain } from './support/harness';

const RUNS = Number(process.env.BENCH_DOCKER_RUNS ?? 3);

/** Wall clock of `podman run --rm <image> node -e …` until its line is printed. */
function bareRun(image: string, containersConf: string): Promise<number> {
  return new Promise((resolve, reject) => {
    const startedAt = performance.now();
    const child = spawn(
      'podman',
      ['--runtime', 'runc', 'run', '--rm', '--network', 'none', image, 'node', '-e', 'console.log("ready")'],
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

export async function run(): Promise<BenchResult[]> {
  const e = await startDockerE2e();
  try {
    const { t, projectId } = e;
    const session = async (): Promise<{ ms: number; id: string }> => {
      const startedAt = performance.now();
      const res = await t.request(CreateSessionDocument, { input: { projectId } });
      if (res.data?.createSession.__typename !== 'CreateSessionSuccess') throw new Error(JSON.stringify(res));
      const id = res.data.createSession.session.sessionId;
      await waitFor(
        async () => {
          const v = await t.request(AgentSessionDocument, { id });
          return v.data?.session?.sandbox?.runtimeState === 'HEALTHY';
        },
        { timeoutMs: 180_000, intervalMs: 50 },
        'the daemon reports HEALTHY',
      );
      return { ms: performance.now() - startedAt, id };
    };
    const stop = (id: string) => t.request(StopSessionDocument, { input: { sessionId: id } });

    // The first session builds the image; it is not measured.
    const first = await session();
    await stop(first.id);
    const sandbox = await t.app.services.db.sandbox.findFirstOrThrow({
      where: { sessionId: first.id },
      include: { snapshot: true },
    });
    const image = sandbox.snapshot?.providerRef;
    if (!image) throw new Error('the first session has no image');

    const ours: number[] = [];
    const bare: number[] = [];
    for (let i = 0; i < RUNS; i++) {
      const s = await session();
      ours.push(s.ms);
      await stop(s.id);
      bare.push(await bareRun(image, e.podman.containersConf));
    }
    return [
      {
        name: 'DOCKER createSession → agent HEALTHY (image cached)',
        value: round(percentile(ours, 50), 0),
        unit: 'ms',
        baseline: round(percentile(bare, 50), 0),
        note: `median of ${RUNS}; baseline = \`podman run --rm\` of the same image until \`node -e\` prints`,
      },
    ];
  } finally {
    await e.stop();
  }
}

runIfMain(import.meta.url, run);
