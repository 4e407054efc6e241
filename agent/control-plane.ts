// A sandbox must not outlive its control plane: once the API has been unreachable for longer than
// the lease's lifetime (the lease is gone by then and nobody can drive the session), the daemon
// stops itself and OpenCode with it. A server that is gone (deleted, or its host reinstalled) then
// leaves nothing running. Any HTTP answer from the API counts as contact; when the daemon's own
// calls (telemetry, events, leases) have been quiet for a while, the watch asks /healthz itself.
import type { Logger } from './logger';

export interface ControlPlaneWatchOptions {
  /** Silence longer than this stops the daemon (SINGULACOMP_CONTROL_PLANE_TIMEOUT_MS). */
  timeoutMs: number;
  /** When the API last answered (performance.now() clock). */
  lastContact: () => number;
  /** Asks the API for any answer; updates lastContact when one comes. Never throws. */
  probe: () => Promise<void>;
  /** Called once, when the silence has lasted longer than timeoutMs. */
  onLost: (silentMs: number) => void;
  logger: Logger;
  /** @default performance.now */
  now?: () => number;
}

export class ControlPlaneWatch {
  private timer: NodeJS.Timeout | null = null;
  private probing = false;
  private lost = false;
  /** How often the silence is looked at: several times per timeout, at most every 30 s. */
  readonly checkMs: number;
  private readonly log: Logger;

  constructor(private readonly options: ControlPlaneWatchOptions) {
    this.checkMs = Math.min(30_000, Math.max(50, Math.floor(options.timeoutMs / 6)));
    this.log = options.logger.child({ module: 'control-plane' });
  }

  start(): void {
    if (this.timer || this.lost) return;
    this.timer = setInterval(() => this.check(), this.checkMs);
  }

  stop(): void {
    if (this.timer) clearInterval(this.timer);
    this.timer = null;
  }

  /** One look at the silence: probe when quiet, give up when quiet for too long. */
  check(): void {
    if (this.lost) return;
    const now = (this.options.now ?? performance.now.bind(performance))();
    const silentMs = now - this.options.lastContact();
    if (silentMs > this.options.timeoutMs) {
      this.lost = true;
      this.stop();
      this.log.error(
        { silentMs: Math.round(silentMs), timeoutMs: this.options.timeoutMs },
        'control plane unreachable for longer than the lease lifetime; stopping',
      );
      this.options.onLost(silentMs);
      return;
    }
    if (silentMs >= this.checkMs && !this.probing) {
      this.probing = true;
      void this.options.probe().finally(() => {
        this.probing = false;
      });
    }
  }
}
