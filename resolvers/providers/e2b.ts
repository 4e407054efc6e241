// E2B adapter over the `e2b` SDK (unchanged). The daemon is the long-lived entry process started
// through envd in the background with no command timeout; our side of the stream is dropped right
// away (the process keeps running). stop = pause (memory snapshot, processes resume where they
// were, so `start` = connect does not relaunch the entry); the sandbox's own deadline pauses rather
// than kills it, and keepAlive pushes that deadline out.
import { Sandbox, type SandboxState as E2BState, Template } from 'e2b';
import type { RuntimeSource } from '../../image/dockerfile';
import { parseDockerfile, splitFlags } from '../../image/dockerfile-parser';
import {
  DEFAULT_ENTRY_COMMAND,
  errorContext,
  idTags,
  METADATA_KEYS,
  METADATA_SANDBOX_ID,
  SERVICE_PORT,
} from './common';
import { ProviderNotFoundError, type RetryOptions, withProviderRetry } from './errors';
import type {
  CreateSandboxRequest,
  HardwareSpec,
  ProviderSandbox,
  SandboxProvider,
  SandboxState,
  SnapshotBuildRequest,
} from './types';

export {
  DEFAULT_ENTRY_COMMAND,
  METADATA_PROJECT_ID,
  METADATA_SANDBOX_ID,
  METADATA_SESSION_ID,
  SERVICE_PORT,
} from './common';

/**
 * E2B's published Pro-tier limits (custom templates up to 8 vCPU and 8 GiB RAM; 20 GiB sandbox
 * disk). Disk is a plan property on E2B, not a template parameter (R-SBX-4).
 */
export const E2B_CAPS: HardwareSpec = { cpu: 8, memoryGiB: 8, diskGiB: 20 };

/** Every E2B sandbox state onto ours (R-SBX-1); a killed sandbox is a 404 (→ DESTROYED). */
export const E2B_STATE_MAP: Record<E2BState, SandboxState> = {
  running: 'STARTED',
  paused: 'HIBERNATED',
};

export function mapE2BState(state: string | undefined): SandboxState {
  return (state && E2B_STATE_MAP[state as E2BState]) || 'ERROR';
}

export interface E2BProviderOptions {
  apiKey: string;
  /** E2B API base. @default the SDK's (https://api.e2b.app) */
  apiUrl?: string;
  /** Sandbox domain. @default the SDK's (e2b.app) */
  domain?: string;
  /** Single envd endpoint (self-hosted edge or emulator); requests carry `E2b-Sandbox-Id`. */
  sandboxUrl?: string;
  /** Template used when a request has no snapshotRef. @default 'base' */
  defaultTemplate?: string;
  /** Long-lived entry process. @default '/usr/local/bin/singulacomp-entrypoint' */
  entryCommand?: string;
  /** Daemon port inside the sandbox. @default 8000 */
  servicePort?: number;
  /** Sandbox deadline set at create and by each keepAlive; at expiry E2B pauses it. @default 1_800_000 */
  idleTimeoutMs?: number;
  /** Maps the `${port}-${id}.${domain}` host to a base URL. @default host => `https://${host}` */
  hostToUrl?: (host: string) => string;
  /** Name of the env var holding the key, for auth error messages. @default 'E2B_API_KEY' */
  apiKeyEnvVar?: string;
  /** Per-request timeout. @default 60_000 */
  requestTimeoutMs?: number;
  retry?: RetryOptions;
}

export class E2BProvider implements SandboxProvider {
  readonly name = 'E2B' as const;
  readonly caps: Partial<HardwareSpec> = E2B_CAPS;
  /** The template builder cannot pull the runtime image: the layer installs it with RUN steps. */
  readonly runtimeSource: RuntimeSource = 'package';
  private readonly entryCommand: string;
  private readonly servicePort: number;
  private readonly idleTimeoutMs: number;
  private readonly hostToUrl: (host: string) => string;

  constructor(private readonly options: E2BProviderOptions) {
    this.entryCommand = options.entryCommand ?? DEFAULT_ENTRY_COMMAND;
    this.servicePort = options.servicePort ?? SERVICE_PORT;
    this.idleTimeoutMs = options.idleTimeoutMs ?? 1_800_000;
    this.hostToUrl = options.hostToUrl ?? ((host) => `https://${host}`);
  }

  /** Connection options passed on every SDK call; nothing is read from the environment. */
  private get connection() {
    const { apiKey, apiUrl, domain, sandboxUrl, requestTimeoutMs } = this.options;
    return {
      apiKey,
      ...(apiUrl ? { apiUrl } : {}),
      ...(domain ? { domain } : {}),
      ...(sandboxUrl ? { sandboxUrl } : {}),
      ...(requestTimeoutMs ? { requestTimeoutMs } : {}),
    };
  }

  private retry<T>(operation: string, fn: () => Promise<T>): Promise<T> {
    const context = errorContext(this.name, operation, this.options.apiKeyEnvVar);
    return withProviderRetry(fn, context, this.options.retry);
  }

  async create(request: CreateSandboxRequest): Promise<ProviderSandbox> {
    const metadata = idTags(request, METADATA_KEYS);
    const template = request.snapshotRef ?? this.options.defaultTemplate ?? 'base';
    let sandbox: Sandbox | null = null;
    try {
      sandbox = await this.retry('create', async () => {
        try {
          return await Sandbox.create(template, {
            ...this.connection,
            envs: request.env,
            metadata,
            timeoutMs: this.idleTimeoutMs,
            lifecycle: { onTimeout: 'pause' },
          });
        } catch (error) {
          // A create that failed after the API accepted it leaves a sandbox tagged with our id.
          await this.removeTagged(request.sandboxId);
          throw error;
        }
      });
      const created = sandbox;
      await this.retry('launchEntry', async () => {
        const handle = await created.commands.run(this.entryCommand, {
          background: true,
          timeoutMs: 0,
          envs: request.env,
        });
        await handle.disconnect();
      });
      return this.describe(created.sandboxId, created.getHost(this.servicePort));
    } catch (error) {
      if (sandbox) await this.destroy(sandbox.sandboxId).catch(() => undefined);
      else await this.removeTagged(request.sandboxId);
      throw error;
    }
  }

  private async removeTagged(sandboxId: string): Promise<void> {
    try {
      const paginator = Sandbox.list({
        ...this.connection,
        query: { metadata: { [METADATA_SANDBOX_ID]: sandboxId } },
      });
      while (paginator.hasNext) {
        for (const info of await paginator.nextItems()) await Sandbox.kill(info.sandboxId, this.connection);
      }
    } catch {
      // The provider is still failing; the orphan keeps our id in its metadata for a later sweep.
    }
  }

  private describe(providerSandboxId: string, host: string): ProviderSandbox {
    return { providerSandboxId, state: 'STARTED', serviceUrl: this.hostToUrl(host) };
  }

  async start(providerSandboxId: string): Promise<ProviderSandbox> {
    const sandbox = await this.retry('start', () =>
      Sandbox.connect(providerSandboxId, { ...this.connection, timeoutMs: this.idleTimeoutMs }),
    );
    return this.describe(providerSandboxId, sandbox.getHost(this.servicePort));
  }

  async stop(providerSandboxId: string): Promise<ProviderSandbox> {
    await this.retry('stop', () => Sandbox.pause(providerSandboxId, this.connection));
    return { providerSandboxId, state: 'HIBERNATED', serviceUrl: null };
  }

  async destroy(providerSandboxId: string): Promise<void> {
    // kill() answers false for an unknown sandbox: already destroyed.
    await this.retry('destroy', () => Sandbox.kill(providerSandboxId, this.connection));
  }

  async keepAlive(providerSandboxId: string): Promise<void> {
    await this.retry('keepAlive', () =>
      Sandbox.setTimeout(providerSandboxId, this.idleTimeoutMs, this.connection),
    );
  }

  async status(providerSandboxId: string): Promise<SandboxState> {
    try {
      const info = await this.retry('status', () => Sandbox.getInfo(providerSandboxId, this.connection));
      return mapE2BState(info.state);
    } catch (error) {
      if (error instanceof ProviderNotFoundError) return 'DESTROYED';
      throw error;
    }
  }

  async previewHost(providerSandboxId: string, port: number): Promise<string> {
    const info = await this.retry('previewHost', () => Sandbox.getInfo(providerSandboxId, this.connection));
    const domain = info.sandboxDomain ?? this.options.domain ?? 'e2b.app';
    return `${port}-${providerSandboxId}.${domain}`;
  }

  /**
   * E2B's template builder converts a Dockerfile into its own steps (the SDK's `fromDockerfile`):
   * one stage only; COPY/ADD upload files from the calling process's directory — the server's, not
   * the repository's — and `--from` has no meaning; heredocs are not read. The runtime layer is
   * composed with `runtimeSource: 'package'` (RUN steps only), so what is left to refuse comes from
   * the user's Dockerfile; such sandboxes boot from `defaultTemplate` (which must carry the runtime).
   * Line numbers are the user's: the layer is appended after their file.
   */
  snapshotUnsupportedReason(dockerfile: string): string | null {
    const { instructions } = parseDockerfile(dockerfile);
    const froms = instructions.filter((instruction) => instruction.keyword === 'FROM');
    if (froms.length > 1) {
      return `E2B's template builder accepts single-stage Dockerfiles only, and this one has ${froms.length} stages (FROM on lines ${froms.map((f) => f.startLine).join(', ')}); make it single-stage (one FROM, no COPY --from) to get a per-project template`;
    }
    for (const instruction of instructions) {
      const { keyword, startLine } = instruction;
      if (keyword !== 'COPY' && keyword !== 'ADD' && instruction.heredocs.length === 0) continue;
      if (instruction.heredocs.length > 0) {
        return `E2B's template builder does not read heredocs (${keyword} on line ${startLine}); write the file with RUN echo/printf instead`;
      }
      if (splitFlags(instruction.args).flags.some((flag) => flag.name === 'from')) {
        return `E2B's template builder cannot ${keyword} --from another image or stage (line ${startLine}); install that content with a RUN step instead`;
      }
      return `E2B's template builder uploads ${keyword} sources from the server, not from the repository (line ${startLine}); fetch those files in a RUN step (curl, git clone) or bake them into the FROM image`;
    }
    return null;
  }

  /**
   * Builds an E2B template named after the content key (reused when the name exists) through the
   * SDK's template build API. CPU and memory belong to the template; disk is E2B's plan size. The
   * Dockerfile must be self-contained (snapshotUnsupportedReason refuses COPY/ADD). The layer's
   * trailing `CMD []` leaves the template without a start command: create() launches the entry.
   */
  async buildSnapshot(request: SnapshotBuildRequest): Promise<string> {
    const name = `singulacomp-${request.key}`;
    if (await this.retry('buildSnapshot', () => Template.exists(name, this.connection))) return name;
    await this.retry('buildSnapshot', () =>
      Template.build(Template().fromDockerfile(request.dockerfile), name, {
        ...this.connection,
        cpuCount: request.spec.cpu,
        memoryMB: request.spec.memoryGiB * 1024,
      }),
    );
    return name;
  }
}
