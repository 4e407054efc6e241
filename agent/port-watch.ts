// Reports the sandbox's listening TCP ports to the API when they change (Sandbox.ports): the
// dashboard's preview picker lists them. The daemon's own service port and OpenCode's are left out.
import type { ApiClient } from './api-client';
import type { Logger } from './logger';
import { sandboxListeningPorts } from './sandbox-ports';

export interface PortWatchOptions {
  api: ApiClient;
  logger: Logger;
  /** null until the bootstrap claim named the sandbox. */
  sandboxId: () => string | null;
  /** Ports never reported (the daemon's and OpenCode's). */
  excluded: () => number[];
  /** How often /proc is scanned. @default 3_000 */
  intervalMs?: number;
  /** @default sandboxListeningPorts */
  scan?: () => Promise<Set<number>>;
}

export class PortWatch {
  private timer: NodeJS.Timeout | null = null;
  private running: Promise<void> | null = null;
  private readonly log: Logger;
  /** The set the API last accepted, as a sorted list joined (null: nothing reported yet). */
  private reported: string | null = null;

  constructor(private readonly options: PortWatchOptions) {
    this.log = options.logger.child({ module: 'port-watch' });
  }

  start(): void {
    if (this.timer) return;
    this.timer = setInterval(() => void this.check(), this.options.intervalMs ?? 3_000);
    this.timer.unref();
    void this.check();
  }

  async stop(): Promise<void> {
    if (this.timer) clearInterval(this.timer);
    this.timer = null;
    await this.running;
  }

  /** Scans once and reports when the set differs from the last one reported. */
  check(): Promise<void> {
    this.running ??= this.scanAndReport().finally(() => {
      this.running = null;
    });
    return this.running;
  }

  private async scanAndReport(): Promise<void> {
    const sandboxId = this.options.sandboxId();
    if (!sandboxId) return;
    const excluded = new Set(this.options.excluded());
    const found = await (this.options.scan ?? sandboxListeningPorts)();
    const ports = [...found].filter((p) => !excluded.has(p)).sort((a, b) => a - b);
    const key = ports.join(',');
    if (key === this.reported) return;
    try {
      await this.options.api.reportSandboxPorts({ sandboxId, ports });
      this.reported = key;
      this.log.info({ ports }, 'listening ports reported');
    } catch (error) {
      this.log.warn({ err: (error as Error).message }, 'listening ports not reported');
    }
  }
}
