// The one interface every sandbox provider adapter implements (R-SBX-2). Adapters translate
// between this shape and a provider's SDK; everything provider-specific stays behind it.

import type { HardwareSpec } from '../../image/spec';

export type ProviderName = 'LOCAL' | 'DAYTONA' | 'E2B' | 'PLATINUM' | 'DOCKER';

/** Our sandbox states (R-SBX-1); each adapter maps its provider's native states onto these. */
export type SandboxState =
  | 'PENDING'
  | 'CREATING'
  | 'STARTING'
  | 'STARTED'
  | 'STOPPING'
  | 'STOPPED'
  | 'HIBERNATED'
  | 'DESTROYED'
  | 'ERROR';

export type { HardwareSpec } from '../../image/spec';

export interface CreateSandboxRequest {
  /** Our Sandbox row id; adapters put it in labels/metadata so orphans can be found. */
  sandboxId: string;
  sessionId: string;
  projectId: string;
  /**
   * This installation's id (resolvers/sessions/installation.ts), tagged on the resource so the
   * reconciler finds its own orphans and never another installation's sandboxes. Unset: untagged.
   */
  installationId?: string;
  spec: HardwareSpec;
  /** Provider snapshot/template reference to boot from (null: the provider's default image). */
  snapshotRef: string | null;
  /** The injected environment of R-SBX-3 (platform variables plus runtime-delivery secrets). */
  env: Record<string, string>;
  /** Git URL (or local path) and branch the workspace is cloned from. */
  workspace: {
    repositoryUrl: string;
    branch: string;
    /** Upstream credential for server-side clones (LOCAL only); never placed in a sandbox's env. */
    credential?: string | null;
  };
  labels: Record<string, string>;
}

export interface ProviderSandbox {
  providerSandboxId: string;
  state: SandboxState;
  /** Base URL at which the server reaches the daemon's service port, when known. */
  serviceUrl: string | null;
  /**
   * Headers the provider's edge needs on every request to `serviceUrl` (Daytona's preview token of
   * a private sandbox). They change on every start: store the latest with the sandbox.
   */
  serviceHeaders?: Record<string, string>;
  /** When the provider ends the sandbox whatever keep-alives say (E2B's maximum sandbox length). */
  expiresAt?: Date | null;
}

/** A provider sandbox carrying our tags, as listTagged finds it. */
export interface TaggedSandbox {
  providerSandboxId: string;
  state: SandboxState;
  /** Our Sandbox row id from its tags (null: the tag is missing). */
  sandboxId: string | null;
  sessionId: string | null;
}

/** A spec fitted to one provider, with a warning per change. */
export interface FittedSpec {
  spec: HardwareSpec;
  warnings: string[];
}

export interface SnapshotBuildRequest {
  /** Content-addressed key (image/snapshot.ts); adapters name the provider artefact after it. */
  key: string;
  dockerfile: string;
  spec: HardwareSpec;
  /**
   * The repository at the session's commit, for builders that take the build context from us (the
   * DOCKER provider sends `git archive` of it): a git directory holding the commit.
   */
  context?: { gitDir: string; commit: string };
  /** The builder's output, a line at a time, while it runs (shown during PREPARING_IMAGE). */
  onLog?: (line: string) => void;
}

export interface SandboxProvider {
  readonly name: ProviderName;
  /** Creates and boots the sandbox with the daemon (or configured entry) as its long-lived entry process. */
  create(request: CreateSandboxRequest): Promise<ProviderSandbox>;
  start(providerSandboxId: string): Promise<ProviderSandbox>;
  stop(providerSandboxId: string): Promise<ProviderSandbox>;
  destroy(providerSandboxId: string): Promise<void>;
  /** Touches the provider's inactivity timer (Daytona last-activity, E2B setTimeout). */
  keepAlive(providerSandboxId: string): Promise<void>;
  status(providerSandboxId: string): Promise<SandboxState>;
  /**
   * Every sandbox at the provider tagged with `installationId` (the reconciler's orphan sweep).
   * Adapters filter at the provider and check each result's tags again.
   */
  listTagged?(installationId: string): Promise<TaggedSandbox[]>;
  /** Host name (or URL) at which a sandbox port is reachable, for previews. */
  previewHost?(providerSandboxId: string, port: number): Promise<string>;
  /** Builds (or finds) a snapshot for a Dockerfile; returns the provider's reference to it. */
  buildSnapshot?(request: SnapshotBuildRequest): Promise<string>;
  /**
   * Why this provider cannot build `dockerfile` (null: it can). Provisioning then boots from the
   * provider's default image and records the reason as a sandbox warning.
   */
  snapshotUnsupportedReason?(dockerfile: string): string | null;
  /**
   * How this provider's image builder takes the runtime layer: 'image' copies it from the runtime
   * image (multi-stage), 'package' downloads the runtime tarball in a RUN step (single-stage
   * builders such as E2B's). @default 'image'
   */
  readonly runtimeSource?: 'image' | 'package';
  /**
   * false: the runtime layer leaves out its package floor (apt packages and toolchain downloads),
   * for builders without network whose runtime image carries Node.js and OpenCode. @default true
   */
  readonly packageFloor?: boolean;
  /** The image the runtime layer copies from (`image` source). @default image/dockerfile.ts's */
  readonly runtimeImage?: string;
  /** Provider caps tighter than the platform's (R-SBX-4), applied after the platform clamp. */
  readonly caps?: Partial<HardwareSpec>;
  /**
   * Shapes a capped spec to what the provider accepts (e.g. E2B's CPU counts of 1 or even),
   * explaining each change. Called after `caps`; see fitSpecToProvider.
   */
  fitSpec?(spec: HardwareSpec): FittedSpec;
  /**
   * Longest a sandbox may run from its start, whatever keep-alives do (E2B: 1 h Hobby, 24 h Pro);
   * undefined: no such limit. Sessions must end cleanly before it.
   */
  readonly maxSandboxLifetimeMs?: number;
  /**
   * The last `maxBytes` of the entry process's output (stdout and stderr), while the provider still
   * has the sandbox; null when it has none (R-REC-2).
   */
  logTail?(providerSandboxId: string, maxBytes: number): Promise<string | null>;
  /**
   * How the sandbox's entry process ended, when this server process launched it and saw it exit
   * (LOCAL); null otherwise.
   */
  entryExit?(providerSandboxId: string): { code: number | null; signal: NodeJS.Signals | null } | null;
  /** Whether the template's memory and cpu are enforced. @default { memory: true, cpu: true } */
  readonly limitsEnforced?: { memory: boolean; cpu: boolean };
  close?(): Promise<void>;
}
