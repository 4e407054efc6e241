// The server's configuration: the one place that reads it from process.env (STYLE: one env.ts per
// process). Elsewhere the environment is only inherited by child processes (git, LOCAL sandboxes).
import { resolve } from 'node:path';
import { z } from 'zod';
import { nestedHosts } from '../resolvers/gateway/access';
import type { LlmConfig } from '../resolvers/gateway/llm';
import { DEFAULT_LOCAL_UID_RANGE, parseUidRange } from '../resolvers/providers/local-uids';

const bool = z
  .enum(['1', '0', 'true', 'false', 'yes', 'no'])
  .transform((v) => v === '1' || v === 'true' || v === 'yes');
const port = z.coerce.number().int().min(0).max(65_535);
const ms = z.coerce.number().int().positive();

/** The fast paths SINGULACOMP_FAST_PATHS names (server/fast-paths/README.md). */
const FAST_PATHS = ['http', 'jit', 'find-many-sql', 'statement-names', 'daemon-pipe'] as const;
type FastPath = (typeof FAST_PATHS)[number];

/** `on`, `off`, or the fast paths to keep, comma-separated (the others are off). */
const fastPathList = z
  .string()
  .transform((v): string[] => {
    const value = v.trim().toLowerCase();
    if (value === 'on') return [...FAST_PATHS];
    if (value === 'off') return [];
    return value
      .split(',')
      .map((n) => n.trim())
      .filter((n) => n.length > 0);
  })
  .pipe(
    z
      .array(z.enum(FAST_PATHS, { message: `each one of on, off, ${FAST_PATHS.join(', ')}` }))
      .refine((paths) => !paths.includes('http') || paths.includes('jit'), 'http runs compiled: add jit'),
  );

const resourceRates = z
  .object({
    cpuPerHourUsd: z.number().nonnegative(),
    memoryGiBPerHourUsd: z.number().nonnegative(),
    diskGiBPerHourUsd: z.number().nonnegative(),
  })
  .partial()
  .strict();
const rateOverrides = z
  .object({
    LOCAL: resourceRates,
    DAYTONA: resourceRates,
    E2B: resourceRates,
    PLATINUM: resourceRates,
    DOCKER: resourceRates,
  })
  .partial()
  .strict();

/** SINGULACOMP_RATES: JSON overrides, validated field by field so its problems join the others. */
const ratesJson = z.string().transform((text, ctx): z.infer<typeof rateOverrides> => {
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch (error) {
    ctx.addIssue({ code: 'custom', message: `not JSON (${(error as Error).message})` });
    return {};
  }
  const parsed = rateOverrides.safeParse(json);
  if (!parsed.success) {
    for (const i of parsed.error.issues) {
      ctx.addIssue({ code: 'custom', message: `${i.path.join('.') || '(root)'} ${i.message}` });
    }
    return {};
  }
  return parsed.data;
});

const llmUpstream = z.object({ baseUrl: z.string().url(), apiKey: z.string().nullable().default(null) });
/** SINGULACOMP_LLM_ACCOUNT_UPSTREAMS: {"<accountId>":{"openai":{baseUrl,apiKey},"anthropic":{…}}}. */
const llmAccountsJson = z.string().transform((text, ctx): LlmConfig['accounts'] => {
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch (error) {
    ctx.addIssue({ code: 'custom', message: `not JSON (${(error as Error).message})` });
    return {};
  }
  const parsed = z
    .record(
      z.string(),
      z.object({ openai: llmUpstream.optional(), anthropic: llmUpstream.optional() }).strict(),
    )
    .safeParse(json);
  if (!parsed.success) {
    for (const i of parsed.error.issues) {
      ctx.addIssue({ code: 'custom', message: `${i.path.join('.') || '(root)'} ${i.message}` });
    }
    return {};
  }
  return parsed.data;
});

const variables = z.object({
  NODE_ENV: z.enum(['development', 'production', 'test']).default('development'),
  PORT: port.default(4000),
  HOST: z.string().default('0.0.0.0'),
  SINGULACOMP_DATA_DIR: z.string().default('./.data'),
  DATABASE_URL: z.string().url().optional(),
  REDIS_URL: z.string().url().optional(),
  LOG_LEVEL: z.enum(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent']).default('info'),
  /** pretty: one readable line per event; json: one JSON object per line. Default: pretty on a terminal outside production. */
  LOG_FORMAT: z.enum(['pretty', 'json']).optional(),
  /** Base URL sandboxes use to reach this API (injected as SINGULACOMP_API_URL). */
  SINGULACOMP_PUBLIC_URL: z.string().url().optional(),
  /** 32-byte key (base64) for secrets at rest and sandbox-token signing; shared by every server process. */
  SINGULACOMP_SECRET_KEY: z.string().optional(),
  /** Entry command the LOCAL provider launches in a sandbox (default: the bundled daemon). */
  SINGULACOMP_LOCAL_ENTRY: z.string().optional(),
  /**
   * Comma-separated names of host variables the LOCAL provider passes into its sandboxes on top of
   * PATH, LANG and TZ (e.g. OPENCODE_DISABLE_AUTOUPDATE,npm_config_offline, or daemon tuning such as
   * SINGULACOMP_LEASE_RENEW_INTERVAL_MS). Credentials are refused: names matching *KEY*, *TOKEN*,
   * *SECRET*, *PASSWORD*, DATABASE_URL, REDIS_URL.
   */
  SINGULACOMP_LOCAL_PASS_ENV: z
    .string()
    .transform((v) =>
      v
        .split(',')
        .map((n) => n.trim())
        .filter((n) => n.length > 0),
    )
    .pipe(
      z.array(
        z
          .string()
          .regex(/^[A-Za-z_][A-Za-z0-9_]*$/, 'not a variable name')
          .refine(
            (n) => !/KEY|TOKEN|SECRET|PASSWORD|^DATABASE_URL$|^REDIS_URL$/i.test(n),
            'credentials never enter a sandbox',
          ),
      ),
    )
    .optional(),
  /**
   * `bwrap` isolates LOCAL sandboxes (namespaces, private filesystem, no host network); `none` runs
   * them as plain processes of the server's user. Unset: bwrap when it works here, else `none` with
   * a warning, and LOCAL sandboxes refused under NODE_ENV=production.
   */
  SINGULACOMP_LOCAL_ISOLATION: z.enum(['bwrap', 'none']).optional(),
  /**
   * `first-last`: host uids a root server runs isolated LOCAL sandboxes as, one per sandbox (gid =
   * uid). Claims live in /var/lib/singulacomp/local-uids, shared by every server on the host.
   */
  SINGULACOMP_LOCAL_UIDS: z
    .string()
    .refine((v) => parseUidRange(v) !== null, 'first-last, both at least 1000')
    .optional(),
  /** Comma-separated host loopback ports isolated LOCAL sandboxes may reach besides the API (e.g. a model endpoint). */
  SINGULACOMP_LOCAL_EGRESS_PORTS: z
    .string()
    .transform((v) =>
      v
        .split(',')
        .map((n) => n.trim())
        .filter((n) => n.length > 0),
    )
    .pipe(
      z.array(
        z
          .string()
          .regex(/^\d{1,5}$/, 'not a port')
          .transform(Number)
          .pipe(z.number().int().min(1).max(65_535)),
      ),
    )
    .optional(),
  SINGULACOMP_GRAPHIQL: bool.optional(),
  /** Whether projects may name a local filesystem repository (never inside the data dir). @default on outside production */
  SINGULACOMP_ALLOW_LOCAL_REPOSITORIES: bool.optional(),
  /** `all`: anyone may introspect; `authenticated`: only callers with a token (default in production). */
  SINGULACOMP_INTROSPECTION: z.enum(['all', 'authenticated']).optional(),
  SINGULACOMP_IDLE_TIMEOUT_MS: ms.default(15 * 60_000),
  /** How long a sandbox's agent may take to boot before the reaper stops it. @default the idle timeout */
  SINGULACOMP_BOOT_TIMEOUT_MS: ms.optional(),
  SINGULACOMP_LEASE_TTL_MS: ms.default(180_000),
  SINGULACOMP_REAPER_INTERVAL_MS: ms.default(30_000),
  SINGULACOMP_TRIGGER_TICK_MS: ms.default(5_000),
  /** Shortest interval between two firings of a schedule; finer schedules are refused. */
  SINGULACOMP_TRIGGER_MIN_INTERVAL_SECONDS: z.coerce.number().int().min(1).max(86_400).default(60),
  /** Webhook deliveries are accepted while their signed X-SingulaComp-Timestamp is this close to now. */
  SINGULACOMP_WEBHOOK_TOLERANCE_SECONDS: z.coerce.number().int().min(1).max(86_400).default(300),
  /** Characters of one tool output or text part the session record keeps (then a marker line). */
  SINGULACOMP_RECORD_MAX_OUTPUT_BYTES: z.coerce.number().int().min(1_024).default(262_144),
  /** Days a session's record is kept after the session ended (0: until the session is deleted). */
  SINGULACOMP_RECORD_RETENTION_DAYS: z.coerce.number().min(0).default(30),
  SINGULACOMP_SHUTDOWN_GRACE_MS: ms.default(10_000),
  SINGULACOMP_RETRY_AFTER_SECONDS: z.coerce.number().int().positive().default(30),
  /**
   * Code that bypasses yoga or Prisma for speed (server/fast-paths/README.md): `on`, `off` (plain
   * yoga execution and Prisma only), or the ones to keep, e.g. `jit,statement-names`.
   */
  SINGULACOMP_FAST_PATHS: fastPathList.optional(),
  /** PostgreSQL connections per server process for requests and background work (the job queue has 4 more). */
  SINGULACOMP_DB_POOL_SIZE: z.coerce.number().int().min(2).max(500).default(20),
  /**
   * How long a request waits for a PostgreSQL connection (new, or a free one from the pool) before it
   * answers SERVICE_UNAVAILABLE. A database that is down refuses at once; one out of connections (too
   * many clients) is waited for, as is a hung one. Must stay above the queueing a create burst causes
   * on a loaded machine.
   */
  SINGULACOMP_DB_CONNECT_TIMEOUT_MS: ms.default(10_000),
  /** Interactive transactions (admission): wait for a connection at most / run at most this long. */
  SINGULACOMP_TX_MAX_WAIT_MS: ms.default(5_000),
  SINGULACOMP_TX_TIMEOUT_MS: ms.default(5_000),
  /**
   * A session create takes the commit its base ref named up to this long ago instead of asking the
   * upstream again (a burst from one branch asks once); pushes this server makes forget it. 0: ask
   * every time.
   */
  SINGULACOMP_REF_CACHE_MS: z.coerce.number().int().min(0).max(60_000).default(1_000),
  /** A provisioning job whose worker stopped heart-beating for this long is taken over (min 10). */
  SINGULACOMP_JOB_HEARTBEAT_SECONDS: z.coerce.number().int().min(10).default(10),
  /**
   * A PROVISIONING session that no job covers is resumed or failed after this long; also how long a
   * provisioning job waits for its creator's release at most (a dead creator's is released at once).
   */
  SINGULACOMP_PROVISIONING_RESUME_MS: ms.default(30_000),
  /** Period of the recovery sweep (resumes or fails interrupted provisioning). */
  SINGULACOMP_RECOVERY_INTERVAL_MS: ms.default(10_000),
  /** Period of the reconciler (orphaned LOCAL processes, sandboxes their provider ended or forgot). */
  SINGULACOMP_RECONCILE_INTERVAL_MS: ms.default(30_000),
  /** A provider sandbox no live session owns is destroyed once it has looked orphaned this long. */
  SINGULACOMP_ORPHAN_GRACE_MS: ms.default(60_000),
  /**
   * This installation's id, tagged on provider sandboxes (default: generated once, kept in the
   * database). A copy of another installation's database must set its own.
   */
  SINGULACOMP_INSTALLATION_ID: z
    .string()
    .regex(/^[A-Za-z0-9._-]{1,63}$/, 'letters, digits, . _ - (at most 63)')
    .optional(),
  /** Retry-After (seconds) on 503 SERVICE_UNAVAILABLE answers while PostgreSQL or Redis is down. */
  SINGULACOMP_UNAVAILABLE_RETRY_AFTER_SECONDS: z.coerce.number().int().positive().default(2),
  /** Provider of new projects that name none (LOCAL unless set). */
  SINGULACOMP_DEFAULT_PROVIDER: z.enum(['LOCAL', 'DAYTONA', 'E2B', 'PLATINUM', 'DOCKER']).default('LOCAL'),
  /** JSON rate overrides, e.g. {"DAYTONA":{"cpuPerHourUsd":0.03}} (defaults in SPEC R-SBX-5). */
  SINGULACOMP_RATES: ratesJson.optional(),
  /** Runtime version baked into sandbox images; part of every snapshot key (R-IMG-3). */
  SINGULACOMP_RUNTIME_VERSION: z
    .string()
    .regex(/^[A-Za-z0-9][A-Za-z0-9._+-]{0,63}$/)
    .optional(),
  /** Where single-stage image builds (E2B) download the runtime tarball from. */
  SINGULACOMP_RUNTIME_BASE_URL: z.string().url().optional(),
  /** SHA-256 of that tarball, pinned into the Dockerfile (else its published .sha256 is checked). */
  SINGULACOMP_RUNTIME_SHA256: z
    .string()
    .regex(/^[0-9a-f]{64}$/)
    .optional(),
  /** Entry command of cloud sandboxes. @default the image's /usr/local/bin/singulacomp-entrypoint */
  SINGULACOMP_SANDBOX_ENTRY: z.string().optional(),
  // Cloud providers: an adapter is built only when its API key is set (credentials stay on the server).
  DAYTONA_API_KEY: z.string().optional(),
  DAYTONA_API_URL: z.string().url().default('https://app.daytona.io/api'),
  DAYTONA_TARGET: z.string().optional(),
  /**
   * This organization's per-sandbox maximum (Daytona's documented default is 4 vCPU / 8 GiB /
   * 10 GiB; raise only after Daytona raised it). Specs are clamped to it with a warning.
   */
  DAYTONA_MAX_CPU: z.coerce.number().int().positive().optional(),
  DAYTONA_MAX_MEMORY_GIB: z.coerce.number().int().positive().optional(),
  DAYTONA_MAX_DISK_GIB: z.coerce.number().int().positive().optional(),
  /** Image a Daytona sandbox without a snapshot is built from (else Daytona's 1/1/3 default snapshot). */
  DAYTONA_DEFAULT_IMAGE: z.string().optional(),
  E2B_API_KEY: z.string().optional(),
  E2B_API_URL: z.string().url().optional(),
  E2B_DOMAIN: z.string().optional(),
  /** Single envd endpoint (self-hosted edge or emulator). */
  E2B_SANDBOX_URL: z.string().url().optional(),
  /** The E2B team's plan: a sandbox lives at most 1 h (hobby) or 24 h (pro) from its start. */
  E2B_PLAN: z.enum(['hobby', 'pro']).default('hobby'),
  /** The team's template maximum (E2B: CPU ≤ 8, memory ≤ 8 GiB). */
  E2B_MAX_CPU: z.coerce.number().int().positive().optional(),
  E2B_MAX_MEMORY_GIB: z.coerce.number().int().positive().optional(),
  PLATINUM_API_KEY: z.string().optional(),
  /** Platinum has no public default endpoint: required with PLATINUM_API_KEY. */
  PLATINUM_API_URL: z.string().url().optional(),
  /**
   * DOCKER provider (R-DOCK-1): the Docker Engine API (unix:///var/run/docker.sock, or tcp://host:2376
   * with DOCKER_TLS_VERIFY=1 and DOCKER_CERT_PATH). Unset: no DOCKER provider.
   */
  DOCKER_HOST: z
    .string()
    .regex(/^(unix|tcp|https?):\/\//, 'unix://… or tcp://…')
    .optional(),
  DOCKER_TLS_VERIFY: z.enum(['0', '1']).optional(),
  DOCKER_CERT_PATH: z.string().optional(),
  /** 0: images without the apt/toolchain package floor (the runtime image brings Node.js and OpenCode). */
  DOCKER_PACKAGE_FLOOR: z.enum(['0', '1']).default('1'),
  /** The runtime package directory (`npm run build:runtime`'s image/ context). */
  DOCKER_RUNTIME_DIR: z.string().optional(),
  /** Where sandbox workspaces and socket directories live on the Docker host (this machine). */
  DOCKER_DATA_DIR: z.string().optional(),
  /** Processes per sandbox container. */
  DOCKER_PIDS_LIMIT: z.coerce.number().int().positive().default(1024),
  /** Prune: snapshot images unused for longer than this go (hours). */
  DOCKER_IMAGE_MAX_AGE_HOURS: z.coerce.number().positive().default(168),
  /** Prune: at most this many snapshot images are kept (newest first). */
  DOCKER_IMAGE_MAX_COUNT: z.coerce.number().int().positive().default(50),
  /**
   * LLM gateway upstreams (R-LLM-1): base URLs and keys stay on the server and never enter a
   * sandbox. The OpenAI base URL ends before `/chat/completions` (e.g. https://api.openai.com/v1),
   * the Anthropic one before `/messages` (e.g. https://api.anthropic.com/v1).
   */
  SINGULACOMP_LLM_OPENAI_BASE_URL: z.string().url().optional(),
  SINGULACOMP_LLM_OPENAI_API_KEY: z.string().optional(),
  SINGULACOMP_LLM_ANTHROPIC_BASE_URL: z.string().url().optional(),
  SINGULACOMP_LLM_ANTHROPIC_API_KEY: z.string().optional(),
  /** Per-account upstreams, which win over the server-wide ones. */
  SINGULACOMP_LLM_ACCOUNT_UPSTREAMS: llmAccountsJson.optional(),
  /** Images kept per gateway request (older ones become a text placeholder). */
  SINGULACOMP_LLM_MAX_IMAGES: z.coerce.number().int().min(0).default(12),
  /** Lifetime of signed preview URLs (the cookie they set lives longer). */
  SINGULACOMP_PREVIEW_URL_TTL_SECONDS: z.coerce.number().int().positive().default(300),
  /**
   * The preview site (host[:port]): previews `p<port>-<sandbox-id>.<domain>` and share links
   * `s-<link-id>.<domain>` resolve to this server (wildcard DNS and certificate). Never the API's
   * host or one nested with it (refused in production). Default: `localhost:<API port>`, since
   * browsers resolve every *.localhost name to loopback.
   */
  SINGULACOMP_PREVIEW_DOMAIN: z
    .string()
    .regex(/^[A-Za-z0-9.-]+(:\d{1,5})?$/)
    .optional(),
  /** Static file-share port of the sandbox image; never reachable through a public share link. */
  SINGULACOMP_FILE_SHARE_PORT: port.default(8080),
});

export type ProviderKind = 'LOCAL' | 'DAYTONA' | 'E2B' | 'PLATINUM' | 'DOCKER';
export type RateOverridesEnv = z.infer<typeof rateOverrides>;

export type RawEnv = z.input<typeof variables>;

/** The object without its undefined fields (exactOptionalPropertyTypes-friendly). */
function defined<T extends Record<string, number | undefined>>(fields: T): { [K in keyof T]?: number } {
  return Object.fromEntries(Object.entries(fields).filter(([, v]) => v !== undefined)) as {
    [K in keyof T]?: number;
  };
}

function fastPathsOf(on: readonly FastPath[]) {
  return {
    /** server/fast-paths/graphql-fast-path.ts: repeated POST /graphql answered from node:http. */
    http: on.includes('http'),
    /** server/fast-paths/compiled-execution.ts: queries, mutations and subscription events run on graphql-jit. */
    jit: on.includes('jit'),
    /** server/fast-paths/find-many-sql.ts: session pages read as one statement. */
    findManySql: on.includes('find-many-sql'),
    /** server/fast-paths/statement-names.ts: Prisma's statements prepared once per connection. */
    statementNames: on.includes('statement-names'),
    /** server/fast-paths/daemon-pipe.ts: previews and the agent proxy forwarded without http-proxy-3. */
    daemonPipe: on.includes('daemon-pipe'),
  };
}

/** The nested, camelCase configuration every other module receives (never process.env itself). */
const schema = variables.transform((e) => ({
  nodeEnv: e.NODE_ENV,
  port: e.PORT,
  host: e.HOST,
  dataDir: resolve(e.SINGULACOMP_DATA_DIR),
  databaseUrl: e.DATABASE_URL ?? null,
  redisUrl: e.REDIS_URL ?? null,
  logLevel: e.LOG_LEVEL as string,
  /** null: pretty on a terminal outside production, JSON otherwise. */
  logFormat: (e.LOG_FORMAT ?? null) as 'pretty' | 'json' | null,
  publicUrl: e.SINGULACOMP_PUBLIC_URL ?? null,
  secretKey: e.SINGULACOMP_SECRET_KEY ?? null,
  localEntry: e.SINGULACOMP_LOCAL_ENTRY ?? null,
  /** Extra host variables passed into LOCAL sandboxes (SINGULACOMP_LOCAL_PASS_ENV). */
  localPassEnv: e.SINGULACOMP_LOCAL_PASS_ENV ?? [],
  /** SINGULACOMP_LOCAL_ISOLATION; null: detect. */
  localIsolation: (e.SINGULACOMP_LOCAL_ISOLATION ?? null) as 'bwrap' | 'none' | null,
  localEgressPorts: e.SINGULACOMP_LOCAL_EGRESS_PORTS ?? [],
  /** SINGULACOMP_LOCAL_UIDS: the uids of isolated LOCAL sandboxes of a root server. */
  localUids:
    (e.SINGULACOMP_LOCAL_UIDS ? parseUidRange(e.SINGULACOMP_LOCAL_UIDS) : null) ?? DEFAULT_LOCAL_UID_RANGE,
  graphiql: e.SINGULACOMP_GRAPHIQL ?? e.NODE_ENV !== 'production',
  allowLocalRepositories: e.SINGULACOMP_ALLOW_LOCAL_REPOSITORIES ?? e.NODE_ENV !== 'production',
  introspection: (e.SINGULACOMP_INTROSPECTION ?? (e.NODE_ENV === 'production' ? 'authenticated' : 'all')) as
    | 'all'
    | 'authenticated',
  idleTimeoutMs: e.SINGULACOMP_IDLE_TIMEOUT_MS,
  bootTimeoutMs: e.SINGULACOMP_BOOT_TIMEOUT_MS ?? e.SINGULACOMP_IDLE_TIMEOUT_MS,
  leaseTtlMs: e.SINGULACOMP_LEASE_TTL_MS,
  reaperIntervalMs: e.SINGULACOMP_REAPER_INTERVAL_MS,
  triggerTickMs: e.SINGULACOMP_TRIGGER_TICK_MS,
  triggerMinIntervalSeconds: e.SINGULACOMP_TRIGGER_MIN_INTERVAL_SECONDS,
  webhookToleranceSeconds: e.SINGULACOMP_WEBHOOK_TOLERANCE_SECONDS,
  record: {
    maxOutputChars: e.SINGULACOMP_RECORD_MAX_OUTPUT_BYTES,
    retentionMs: Math.round(e.SINGULACOMP_RECORD_RETENTION_DAYS * 86_400_000),
  },
  shutdownGraceMs: e.SINGULACOMP_SHUTDOWN_GRACE_MS,
  retryAfterSeconds: e.SINGULACOMP_RETRY_AFTER_SECONDS,
  database: {
    poolSize: e.SINGULACOMP_DB_POOL_SIZE,
    connectTimeoutMs: e.SINGULACOMP_DB_CONNECT_TIMEOUT_MS,
    txMaxWaitMs: e.SINGULACOMP_TX_MAX_WAIT_MS,
    txTimeoutMs: e.SINGULACOMP_TX_TIMEOUT_MS,
  },
  transaction: { maxWaitMs: e.SINGULACOMP_TX_MAX_WAIT_MS, timeoutMs: e.SINGULACOMP_TX_TIMEOUT_MS },
  refCacheMs: e.SINGULACOMP_REF_CACHE_MS,
  /** Which fast paths run (SINGULACOMP_FAST_PATHS); each off one leaves its work to yoga or Prisma. */
  fastPaths: fastPathsOf(e.SINGULACOMP_FAST_PATHS ?? FAST_PATHS),
  unavailableRetryAfterSeconds: e.SINGULACOMP_UNAVAILABLE_RETRY_AFTER_SECONDS,
  jobs: {
    heartbeatSeconds: e.SINGULACOMP_JOB_HEARTBEAT_SECONDS,
    provisioningResumeMs: e.SINGULACOMP_PROVISIONING_RESUME_MS,
    recoveryIntervalMs: e.SINGULACOMP_RECOVERY_INTERVAL_MS,
    reconcileIntervalMs: e.SINGULACOMP_RECONCILE_INTERVAL_MS,
    orphanGraceMs: e.SINGULACOMP_ORPHAN_GRACE_MS,
  },
  installationId: e.SINGULACOMP_INSTALLATION_ID ?? null,
  defaultProvider: e.SINGULACOMP_DEFAULT_PROVIDER as ProviderKind,
  rates: e.SINGULACOMP_RATES ?? {},
  runtimeVersion: e.SINGULACOMP_RUNTIME_VERSION ?? '0.1.0',
  runtimeBaseUrl: e.SINGULACOMP_RUNTIME_BASE_URL ?? null,
  runtimeSha256: e.SINGULACOMP_RUNTIME_SHA256 ?? null,
  sandboxEntry: e.SINGULACOMP_SANDBOX_ENTRY ?? null,
  daytona: e.DAYTONA_API_KEY
    ? {
        apiKey: e.DAYTONA_API_KEY,
        apiUrl: e.DAYTONA_API_URL,
        target: e.DAYTONA_TARGET ?? null,
        /** Per-sandbox caps configured for this organization (unset fields: Daytona's defaults). */
        caps: defined({
          cpu: e.DAYTONA_MAX_CPU,
          memoryGiB: e.DAYTONA_MAX_MEMORY_GIB,
          diskGiB: e.DAYTONA_MAX_DISK_GIB,
        }),
        defaultImage: e.DAYTONA_DEFAULT_IMAGE ?? null,
      }
    : null,
  e2b: e.E2B_API_KEY
    ? {
        apiKey: e.E2B_API_KEY,
        apiUrl: e.E2B_API_URL ?? null,
        domain: e.E2B_DOMAIN ?? null,
        sandboxUrl: e.E2B_SANDBOX_URL ?? null,
        caps: defined({ cpu: e.E2B_MAX_CPU, memoryGiB: e.E2B_MAX_MEMORY_GIB }),
        /** The team's plan: disk (10 / 20 GiB), maximum sandbox length (1 h / 24 h), create rate. */
        plan: e.E2B_PLAN,
        /** The plan's maximum sandbox length (hobby 1 h, pro 24 h). */
        maxSandboxLifetimeMs: e.E2B_PLAN === 'pro' ? 24 * 3_600_000 : 3_600_000,
      }
    : null,
  llm: {
    openai: e.SINGULACOMP_LLM_OPENAI_BASE_URL
      ? { baseUrl: e.SINGULACOMP_LLM_OPENAI_BASE_URL, apiKey: e.SINGULACOMP_LLM_OPENAI_API_KEY ?? null }
      : null,
    anthropic: e.SINGULACOMP_LLM_ANTHROPIC_BASE_URL
      ? { baseUrl: e.SINGULACOMP_LLM_ANTHROPIC_BASE_URL, apiKey: e.SINGULACOMP_LLM_ANTHROPIC_API_KEY ?? null }
      : null,
    accounts: e.SINGULACOMP_LLM_ACCOUNT_UPSTREAMS ?? {},
    maxImages: e.SINGULACOMP_LLM_MAX_IMAGES,
  } satisfies LlmConfig,
  previewUrlTtlSeconds: e.SINGULACOMP_PREVIEW_URL_TTL_SECONDS,
  previewDomain: e.SINGULACOMP_PREVIEW_DOMAIN ?? null,
  fileSharePort: e.SINGULACOMP_FILE_SHARE_PORT,
  platinum:
    e.PLATINUM_API_KEY && e.PLATINUM_API_URL
      ? { apiKey: e.PLATINUM_API_KEY, apiUrl: e.PLATINUM_API_URL }
      : null,
  docker: e.DOCKER_HOST
    ? {
        host: e.DOCKER_HOST,
        tlsVerify: e.DOCKER_TLS_VERIFY === '1',
        certPath: e.DOCKER_CERT_PATH ?? null,
        packageFloor: e.DOCKER_PACKAGE_FLOOR === '1',
        runtimeDir: e.DOCKER_RUNTIME_DIR ?? null,
        dataDir: e.DOCKER_DATA_DIR ?? null,
        pidsLimit: e.DOCKER_PIDS_LIMIT,
        imageMaxAgeMs: e.DOCKER_IMAGE_MAX_AGE_HOURS * 3_600_000,
        imageMaxCount: e.DOCKER_IMAGE_MAX_COUNT,
      }
    : null,
}));

export type ServerEnv = z.output<typeof schema>;

/** Rules across variables; checked on the raw values so they are reported with every field problem. */
function crossFieldProblems(raw: Record<string, string>): string[] {
  const problems: string[] = [];
  // The database and Redis are exactly what sandboxes must never reach.
  const egress = (raw.SINGULACOMP_LOCAL_EGRESS_PORTS ?? '').split(',').map((p) => Number(p.trim()));
  for (const [name, fallback] of [
    ['DATABASE_URL', 5432],
    ['REDIS_URL', 6379],
  ] as const) {
    const url = raw[name];
    if (!url || !URL.canParse(url)) continue;
    const port = Number(new URL(url).port || fallback);
    if (egress.includes(port))
      problems.push(
        `  SINGULACOMP_LOCAL_EGRESS_PORTS: ${port} is the ${name} port; sandboxes never reach it`,
      );
  }
  // A preview on the API's host (or one nested with it) shares its site: cookies set for the
  // parent domain reach the API, and the preview is same-site with the dashboard (R-PRV-4).
  const previewDomain = raw.SINGULACOMP_PREVIEW_DOMAIN?.replace(/:\d+$/, '');
  const publicUrl = raw.SINGULACOMP_PUBLIC_URL;
  if (raw.NODE_ENV === 'production' && previewDomain && publicUrl && URL.canParse(publicUrl)) {
    const apiHost = new URL(publicUrl).hostname;
    if (nestedHosts(previewDomain, apiHost)) {
      problems.push(
        `  SINGULACOMP_PREVIEW_DOMAIN: ${previewDomain} is the API's host or nested with it (${apiHost}); previews need a domain of their own`,
      );
    }
  }
  if (raw.PLATINUM_API_KEY && !raw.PLATINUM_API_URL) {
    problems.push('  PLATINUM_API_URL: required when PLATINUM_API_KEY is set');
  }
  return problems;
}

/** Parses an environment (process.env by default); every problem is reported at once. */
export function parseEnv(source: Record<string, string | undefined> = process.env): ServerEnv {
  const cleaned = Object.fromEntries(
    Object.entries(source).filter(
      (entry): entry is [string, string] => entry[1] !== undefined && entry[1] !== '',
    ),
  );
  const result = schema.safeParse(cleaned);
  const problems = [
    ...(result.success ? [] : result.error.issues.map((i) => `  ${i.path.join('.')}: ${i.message}`)),
    ...crossFieldProblems(cleaned),
  ];
  if (problems.length > 0 || !result.success) throw new Error(`Invalid environment:\n${problems.join('\n')}`);
  return result.data;
}

/** Every variable the server reads (deployment files are checked against it). */
export const ENV_VARIABLES: ReadonlySet<string> = new Set(Object.keys(variables.shape));
