// What a sandbox tells about itself beyond telemetry (R-REC-2): its listening ports as the daemon
// reports them, the tail of its entry process's log (live from the provider, or the copy kept when
// it stopped or failed), and whether its provider enforces the template's limits.
import type { Db, Logger } from '../platform';
import type { Principal } from '../auth/principal';
import { assertDaemon } from '../auth/policy';
import { forbidden, ValidationError } from '../errors';
import { parseId } from '../ids';
import type { ProviderRegistry } from '../providers/registry';
import type { ProviderName } from '../providers/types';

/** Default and largest log tail the API returns. */
export const DEFAULT_LOG_TAIL_BYTES = 16 * 1024;
export const MAX_LOG_TAIL_BYTES = 256 * 1024;
/** Ports one report may carry. */
const MAX_PORTS = 256;

export interface SandboxInfoOptions {
  db: Db;
  providers: ProviderRegistry;
  logger: Logger;
  now?: () => number;
}

export type SandboxInfo = ReturnType<typeof createSandboxInfo>;

/** The last `maxBytes` of `text`, starting at a line boundary when one is near. */
export function tailOf(text: string, maxBytes: number): string {
  const bytes = Buffer.from(text, 'utf8');
  if (bytes.length <= maxBytes) return text;
  const tail = bytes.subarray(bytes.length - maxBytes).toString('utf8');
  const newline = tail.indexOf('\n');
  return newline >= 0 && newline < 200 && newline < tail.length - 1 ? tail.slice(newline + 1) : tail;
}

export function createSandboxInfo(options: SandboxInfoOptions) {
  const { db, providers } = options;
  const log = options.logger.child({ module: 'sandbox-info' });
  const now = options.now ?? Date.now;

  async function liveTail(provider: ProviderName, providerSandboxId: string, maxBytes: number) {
    if (!providers.has(provider)) return null;
    const adapter = providers.get(provider);
    if (!adapter.logTail) return null;
    return adapter.logTail(providerSandboxId, maxBytes).catch((error: unknown) => {
      log.warn({ providerSandboxId, err: (error as Error).message }, 'log tail not readable');
      return null;
    });
  }

  return {
    /** The sandbox by id or null, no read check (`query`: the GraphQL selection); callers check. */
    find<Q extends object>(id: string, query?: Q) {
      return db.sandbox.findUnique({ ...(query ?? {}), where: { id } });
    },

    /** As `find`, for a sandbox known to exist (an event's): throws when it is gone. */
    get<Q extends object>(id: string, query?: Q) {
      return db.sandbox.findUniqueOrThrow({ ...(query ?? {}), where: { id } });
    },

    /** Sandbox.logTail: the provider's live log while it has one, else the copy kept at the end. */
    async tail(
      sandbox: { id: string; provider: ProviderName; providerSandboxId: string | null },
      maxBytes: number | null,
    ): Promise<string | null> {
      const limit = Math.min(Math.max(maxBytes ?? DEFAULT_LOG_TAIL_BYTES, 1), MAX_LOG_TAIL_BYTES);
      const live = sandbox.providerSandboxId
        ? await liveTail(sandbox.provider, sandbox.providerSandboxId, limit)
        : null;
      const kept = live
        ? null
        : await db.sandboxReport.findUnique({ where: { sandboxId: sandbox.id }, select: { logTail: true } });
      const text = live ?? kept?.logTail ?? null;
      return text === null ? null : tailOf(text, limit);
    },

    /** Sandbox.ports and portsReportedAt (none reported yet: empty). */
    async ports(sandboxId: string): Promise<{ ports: number[]; reportedAt: Date | null }> {
      const report = await db.sandboxReport.findUnique({
        where: { sandboxId },
        select: { ports: true, portsReportedAt: true },
      });
      return { ports: report?.ports ?? [], reportedAt: report?.portsReportedAt ?? null };
    },

    limitsEnforced(provider: ProviderName): { memory: boolean; cpu: boolean } {
      const adapter = providers.has(provider) ? providers.get(provider) : null;
      return adapter?.limitsEnforced ?? { memory: true, cpu: true };
    },

    /** reportSandboxPorts: the full set of listening ports, from the sandbox's own daemon. */
    async reportPorts(principal: Principal | null, input: { sandboxId: string; ports: readonly number[] }) {
      const sandboxId = parseId(input.sandboxId, 'Sandbox', ['input', 'sandboxId']);
      assertDaemon(principal, 'Only the sandbox token can report ports.');
      if (principal.sandboxId !== sandboxId)
        throw forbidden('A sandbox token can only report its own ports.');
      if (input.ports.length > MAX_PORTS)
        throw new ValidationError(`At most ${MAX_PORTS} ports per report.`, ['input', 'ports']);
      if (input.ports.some((p) => !Number.isInteger(p) || p < 1 || p > 65_535))
        throw new ValidationError('Ports are 1 to 65535.', ['input', 'ports']);
      const ports = [...new Set(input.ports)].sort((a, b) => a - b);
      const data = { ports, portsReportedAt: new Date(now()) };
      await db.sandboxReport.upsert({ where: { sandboxId }, create: { sandboxId, ...data }, update: data });
      return { ports };
    },
  };
}
