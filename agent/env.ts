// The daemon's configuration: the injected environment of docs/agent-api.md plus host-only flags.
// Nothing else in agent/ reads process.env.
import { parseArgs } from 'node:util';
import { parseObject, type Shape } from './validate';

const envShape = {
  SINGULACOMP_SESSION_ID: { type: 'string', min: 1 },
  SINGULACOMP_BRANCH_NAME: { type: 'string', min: 1, optional: true },
  SINGULACOMP_PROJECT_ID: { type: 'string', min: 1 },
  SINGULACOMP_TOKEN: { type: 'string', min: 1 },
  SINGULACOMP_API_URL: { type: 'url' },
  SINGULACOMP_SERVICE_PORT: { type: 'number', int: true, min: 0, max: 65_535, default: 8000 },
  SINGULACOMP_MEMORY_GUARD_PCT: { type: 'number', gt: 0, max: 100, default: 92 },
  SINGULACOMP_ATTACHMENT_OFFLOAD: { type: 'enum', values: ['0', '1'], default: '1' },
  /** Lease renewal interval while a turn is busy (R-LEASE-1); tests and single-host installs scale it. */
  SINGULACOMP_LEASE_RENEW_INTERVAL_MS: { type: 'number', int: true, min: 100, max: 600_000, optional: true },
  /**
   * Ports the proxy may also reach though no process of the daemon's tree listens on them (an app
   * the image starts beside the daemon). Never the service port or the API's.
   */
  SINGULACOMP_PROXY_EXTRA_PORTS: {
    type: 'string',
    pattern: /^\d{1,5}(,\d{1,5})*$/,
    patternMessage: 'comma-separated port numbers',
    optional: true,
  },
  /** Silence from the API after which the daemon stops itself (the LOCAL provider passes the lease TTL). */
  SINGULACOMP_CONTROL_PLANE_TIMEOUT_MS: { type: 'number', int: true, min: 100, optional: true },
  /** Telemetry push interval (R-AG-4). */
  SINGULACOMP_TELEMETRY_INTERVAL_MS: { type: 'number', int: true, min: 100, max: 3_600_000, optional: true },
  /**
   * The LLM gateway's models as the server listed them when it provisioned the sandbox (a JSON
   * array of ids; `[]`: it serves none): OpenCode starts on them without the daemon asking the
   * gateway first.
   */
  SINGULACOMP_LLM_MODELS: { type: 'string', min: 2, optional: true },
  /** Memory guard sampling period, below and above its fast-sampling line (R-AG-5). */
  SINGULACOMP_MEMORY_SAMPLE_MS: { type: 'number', int: true, min: 100, max: 600_000, optional: true },
  LOG_LEVEL: {
    type: 'enum',
    values: ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'],
    default: 'info',
  },
} satisfies Shape;

const flagShape = {
  workspace: { type: 'string', min: 1, optional: true },
  home: { type: 'string', min: 1, optional: true },
  opencodePort: { type: 'number', int: true, min: 1, max: 65_535, default: 4096 },
  opencodeBin: { type: 'string', min: 1, optional: true },
} satisfies Shape;

export interface AgentEnv {
  sessionId: string;
  branchName: string;
  projectId: string;
  token: string;
  apiUrl: string;
  servicePort: number;
  memoryGuardPct: number;
  attachmentOffload: boolean;
  logLevel: string;
  leaseRenewIntervalMs?: number;
  telemetryIntervalMs?: number;
  memorySampleMs?: number;
  controlPlaneTimeoutMs?: number;
  proxyExtraPorts: number[];
  gatewayModels?: string[];
  workspace: string;
  home: string;
  opencodePort: number;
  opencodeBin?: string;
}

/** Thrown when the environment or flags are invalid; lists every problem at once. */
export class AgentConfigError extends Error {
  override readonly name = 'AgentConfigError';
}

export function parseAgentEnv(env: NodeJS.ProcessEnv, argv: string[]): AgentEnv {
  const problems: string[] = [];
  let flags: Record<string, string | undefined> = {};
  try {
    const { values } = parseArgs({
      args: argv,
      options: {
        workspace: { type: 'string' },
        home: { type: 'string' },
        'opencode-port': { type: 'string' },
        'opencode-bin': { type: 'string' },
      },
      strict: true,
      allowPositionals: false,
    });
    flags = {
      workspace: values.workspace,
      home: values.home,
      opencodePort: values['opencode-port'],
      opencodeBin: values['opencode-bin'],
    };
  } catch (error) {
    problems.push(`flags: ${(error as Error).message}`);
  }
  const parsedEnv = parseObject(envShape, env);
  if (!parsedEnv.success) {
    for (const issue of parsedEnv.issues) problems.push(`${issue.path.join('.')}: ${issue.message}`);
  }
  const parsedFlags = parseObject(
    flagShape,
    Object.fromEntries(Object.entries(flags).filter(([, v]) => v !== undefined)),
  );
  if (!parsedFlags.success) {
    for (const issue of parsedFlags.issues) problems.push(`--${issue.path.join('.')}: ${issue.message}`);
  }
  if (problems.length > 0 || !parsedEnv.success || !parsedFlags.success) {
    throw new AgentConfigError(`invalid daemon configuration:\n  ${problems.join('\n  ')}`);
  }
  const e = parsedEnv.data as {
    SINGULACOMP_SESSION_ID: string;
    SINGULACOMP_BRANCH_NAME?: string;
    SINGULACOMP_PROJECT_ID: string;
    SINGULACOMP_TOKEN: string;
    SINGULACOMP_API_URL: string;
    SINGULACOMP_SERVICE_PORT: number;
    SINGULACOMP_MEMORY_GUARD_PCT: number;
    SINGULACOMP_ATTACHMENT_OFFLOAD: '0' | '1';
    SINGULACOMP_LEASE_RENEW_INTERVAL_MS?: number;
    SINGULACOMP_PROXY_EXTRA_PORTS?: string;
    SINGULACOMP_TELEMETRY_INTERVAL_MS?: number;
    SINGULACOMP_MEMORY_SAMPLE_MS?: number;
    SINGULACOMP_CONTROL_PLANE_TIMEOUT_MS?: number;
    SINGULACOMP_LLM_MODELS?: string;
    LOG_LEVEL: string;
  };
  const gatewayModels =
    e.SINGULACOMP_LLM_MODELS === undefined ? undefined : parseModels(e.SINGULACOMP_LLM_MODELS);
  if (gatewayModels === null) {
    throw new AgentConfigError(
      'invalid daemon configuration:\n  SINGULACOMP_LLM_MODELS: a JSON array of model ids',
    );
  }
  const f = parsedFlags.data as {
    workspace?: string;
    home?: string;
    opencodePort: number;
    opencodeBin?: string;
  };
  return {
    sessionId: e.SINGULACOMP_SESSION_ID,
    branchName: e.SINGULACOMP_BRANCH_NAME ?? e.SINGULACOMP_SESSION_ID,
    projectId: e.SINGULACOMP_PROJECT_ID,
    token: e.SINGULACOMP_TOKEN,
    apiUrl: e.SINGULACOMP_API_URL,
    servicePort: e.SINGULACOMP_SERVICE_PORT,
    memoryGuardPct: e.SINGULACOMP_MEMORY_GUARD_PCT,
    attachmentOffload: e.SINGULACOMP_ATTACHMENT_OFFLOAD !== '0',
    logLevel: e.LOG_LEVEL,
    proxyExtraPorts: (e.SINGULACOMP_PROXY_EXTRA_PORTS ?? '').split(',').filter(Boolean).map(Number),
    ...(e.SINGULACOMP_LEASE_RENEW_INTERVAL_MS
      ? { leaseRenewIntervalMs: e.SINGULACOMP_LEASE_RENEW_INTERVAL_MS }
      : {}),
    ...(e.SINGULACOMP_TELEMETRY_INTERVAL_MS
      ? { telemetryIntervalMs: e.SINGULACOMP_TELEMETRY_INTERVAL_MS }
      : {}),
    ...(e.SINGULACOMP_MEMORY_SAMPLE_MS ? { memorySampleMs: e.SINGULACOMP_MEMORY_SAMPLE_MS } : {}),
    ...(e.SINGULACOMP_CONTROL_PLANE_TIMEOUT_MS
      ? { controlPlaneTimeoutMs: e.SINGULACOMP_CONTROL_PLANE_TIMEOUT_MS }
      : {}),
    ...(gatewayModels ? { gatewayModels } : {}),
    workspace: f.workspace ?? '/workspace',
    home: f.home ?? '/opt/singulacomp/home',
    opencodePort: f.opencodePort,
    ...(f.opencodeBin !== undefined ? { opencodeBin: f.opencodeBin } : {}),
  };
}

/** A JSON array of non-empty strings (possibly empty), else null. */
function parseModels(text: string): string[] | null {
  try {
    const value: unknown = JSON.parse(text);
    if (!Array.isArray(value)) return null;
    return value.every((id) => typeof id === 'string' && id.length > 0) ? (value as string[]) : null;
  } catch {
    return null;
  }
}
