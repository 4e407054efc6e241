// End-to-end fixtures: a server whose LOCAL provider launches the real daemon (the default entry
// command), a project whose repository carries an OpenCode config pointing at the stub model, and
// cleanup of every process a sandbox left behind.
import { existsSync, readFileSync, readdirSync, readlinkSync } from 'node:fs';
import { join } from 'node:path';
import {
  GATEWAY_OPENCODE_CONFIG,
  OFFLINE_OPENCODE_ENV,
  OPENCODE_CONFIG_SUBDIR,
  opencodeConfig,
} from '../fixtures/opencode-project';
import { type StubModel, startStubModel } from '../fixtures/stub-model';
import { type TestApp, startTestApp } from '../support/app';
import { type TestRepo, createTestRepo } from '../support/git';
import { type LiveSession, createProject, startSession } from '../leases/helpers';
import { testRunEnv } from '../support/test-run';
import { waitFor } from '../support/wait';

/**
 * beforeAll budget: a fresh PGlite runs initdb in WebAssembly on the test's own thread, which takes
 * tens of seconds on a loaded 2-core machine before the daemon and OpenCode even start.
 */
export const E2E_SETUP_TIMEOUT_MS = 300_000;

export interface E2eOptions {
  /** @default 'postgres' */
  db?: 'postgres' | 'pglite';
  /** Server settings (idle timeout, lease TTL, reaper interval). */
  env?: Record<string, string>;
  /** Daemon settings passed through SINGULACOMP_LOCAL_PASS_ENV. */
  daemonEnv?: Record<string, string>;
  /**
   * OpenCode reaches the stub model only through the server's LLM gateway: the repository's config
   * names the gateway's model and holds no provider or key; the server holds the upstream key.
   */
  gateway?: boolean;
  /** The server's clock (see support/clock.ts): a test jumps past a timeout instead of waiting it out. */
  now?: () => number;
}

/**
 * A session whose app is a process of the test's on the host's loopback, as one the image starts
 * beside the daemon would be: the sandbox runs unisolated and the daemon is told the app's port (it
 * otherwise serves only ports its sandbox's own processes hold). The LLM gateway is on.
 */
export function appBesideDaemon(appPort: number): E2eOptions {
  return {
    gateway: true,
    daemonEnv: { SINGULACOMP_ATTACHMENT_OFFLOAD: '0', SINGULACOMP_PROXY_EXTRA_PORTS: String(appPort) },
    env: { SINGULACOMP_LOCAL_ISOLATION: 'none' },
  };
}

/** The upstream key the server holds when `gateway` is set; it must never reach a sandbox. */
export const SERVER_HELD_MODEL_KEY = 'sk-server-held-upstream-key';

export interface E2e {
  t: TestApp;
  stub: StubModel;
  repo: TestRepo;
  /** Directory of a LOCAL sandbox (workspace/, home/, entry.pid, entry.log). */
  sandboxDir(providerSandboxId: string): string;
  /** Waits for the sandbox's daemon process (the entrypoint starts it a moment after the sandbox). */
  daemonPid(providerSandboxId: string): Promise<number>;
  /** Processes (pid) whose working directory is inside the sandbox: the daemon and OpenCode. */
  processesIn(providerSandboxId: string): number[];
  /** Where a session stood, for a failing test: its sandbox row and the tail of its daemon's log. */
  describeSession(sessionId: string): Promise<string>;
  stop(): Promise<void>;
}

/**
 * What a test's LOCAL sandbox daemon takes from the host (through SINGULACOMP_LOCAL_PASS_ENV):
 * OpenCode kept offline, the run's id and settings (`testRunEnv()`), then `extra`.
 */
export function localDaemonEnv(extra: Record<string, string> = {}): Record<string, string> {
  return { ...OFFLINE_OPENCODE_ENV, ...testRunEnv(), ...extra };
}

export async function startE2e(options: E2eOptions = {}): Promise<E2e> {
  const stub = await startStubModel({ reply: 'Done.' });
  const config = options.gateway ? GATEWAY_OPENCODE_CONFIG : opencodeConfig({ baseURL: stub.baseURL });
  const repo = createTestRepo({
    'README.md': '# e2e\n',
    [join(OPENCODE_CONFIG_SUBDIR, 'opencode.json')]: `${JSON.stringify(config, null, 2)}\n`,
  });
  // The LOCAL provider passes only PATH/LANG/TZ, HOME and the injected variables into a sandbox;
  // everything else a daemon needs here travels through SINGULACOMP_LOCAL_PASS_ENV from the host.
  const daemonEnv = localDaemonEnv(options.daemonEnv);
  Object.assign(process.env, daemonEnv);
  const t = await startTestApp({
    db: options.db,
    ...(options.now ? { now: options.now } : {}),
    env: {
      // Empty selects the default entry command: the bundled daemon.
      SINGULACOMP_LOCAL_ENTRY: '',
      SINGULACOMP_LOCAL_PASS_ENV: Object.keys(daemonEnv).join(','),
      // An isolated sandbox reaches only the API and the ports listed here: the stub model.
      SINGULACOMP_LOCAL_EGRESS_PORTS: new URL(stub.baseURL).port,
      ...(options.gateway
        ? {
            SINGULACOMP_LLM_OPENAI_BASE_URL: stub.baseURL,
            SINGULACOMP_LLM_OPENAI_API_KEY: SERVER_HELD_MODEL_KEY,
          }
        : {}),
      ...options.env,
    },
  });
  const sandboxDir = (id: string) => join(t.dataDir, 'sandboxes', id);
  /** Processes working in `dir` or below it (also once the directory is deleted). */
  const processesBelow = (dir: string): number[] => {
    const pids: number[] = [];
    for (const entry of readdirSync('/proc')) {
      if (!/^\d+$/.test(entry)) continue;
      try {
        const cwd = readlinkSync(`/proc/${entry}/cwd`).replace(/ \(deleted\)$/, '');
        if (cwd === dir || cwd.startsWith(`${dir}/`)) pids.push(Number(entry));
      } catch {
        // gone, or not ours to inspect
      }
    }
    return pids;
  };
  const processesIn = (id: string): number[] => processesBelow(sandboxDir(id));
  // By path prefix, not by listing the sandboxes: t.stop() deletes the directories, and a process
  // whose working directory was deleted still shows its old path (with " (deleted)").
  const allSandboxProcesses = (): number[] => processesBelow(join(t.dataDir, 'sandboxes'));
  return {
    t,
    stub,
    repo,
    sandboxDir,
    daemonPid: (id) =>
      // The entry process is bubblewrap and then the entrypoint shell, whose command lines name the
      // daemon's script too: the daemon is the node process that runs it.
      waitFor(
        () =>
          processesIn(id).find((pid) => {
            try {
              const [program = '', ...args] = readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0');
              return /(^|\/)node$/.test(program) && args.some((arg) => arg.endsWith('singulacomp-agent.mjs'));
            } catch {
              return false;
            }
          }),
        30_000,
        `the daemon process of sandbox ${id}`,
      ),
    processesIn,
    async describeSession(sessionId) {
      const sandbox = await t.app.services.db.sandbox.findUnique({ where: { sessionId } }).catch(() => null);
      const log = sandbox?.providerSandboxId
        ? join(sandboxDir(sandbox.providerSandboxId), 'entry.log')
        : null;
      const tail = log && existsSync(log) ? readFileSync(log, 'utf8').slice(-6_000) : '(no daemon log)';
      return `sandbox: ${JSON.stringify(sandbox, (key, value) => (key.endsWith('Enc') ? undefined : value))}\ndaemon log:\n${tail}`;
    },
    async stop() {
      // OpenCode runs in its own process group, so a daemon killed by a test leaves it behind.
      // Scanned before and after the server's stop, which may start or leave processes meanwhile.
      const leftovers = allSandboxProcesses();
      await t.stop().catch(() => {});
      for (const pid of new Set([...leftovers, ...allSandboxProcesses()])) {
        try {
          process.kill(pid, 'SIGKILL');
        } catch {
          // already gone
        }
      }
      await stub.close();
      repo.remove();
      for (const key of Object.keys(daemonEnv)) delete process.env[key];
    },
  };
}

/** A project of the e2e's repository and a session on it whose agent is ready (OpenCode answers). */
export async function startReadySession(e: E2e): Promise<LiveSession> {
  const s = await startSession(e.t, await createProject(e.t, e.repo.url));
  await waitFor(
    async () => {
      const v = await e.t.raw({ query: `{ session(id: "${s.sessionId}") { agentReady } }` });
      return (v.data as { session: { agentReady: boolean } } | null)?.session.agentReady;
    },
    90_000,
    'the agent to be ready',
  );
  return s;
}
