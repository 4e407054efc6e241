// R-AG-1: claims the bootstrap, runs `opencode serve`, restarts it with capped backoff when it dies,
// and sends the initial prompt once OpenCode is healthy.
import { EventEmitter } from 'node:events';
import { type Clock, type ClockTimer, sleep, systemClock } from '../contract/clock';
import { Backoff, type BackoffOptions } from '../contract/retry';
import type { ApiClient, Bootstrap, RuntimeState } from './api-client';
import type { Logger } from './logger';
import { OpencodeProcess } from './opencode';

export interface SupervisorOptions {
  api: ApiClient;
  logger: Logger;
  sessionId: string;
  bin: string;
  port: number;
  workspace: string;
  home: string;
  configDir: string;
  env: Record<string, string>;
  healthTimeoutMs: number;
  healthPollMs: number;
  restartBackoff: BackoffOptions;
  /** A runtime that stays up this long resets the restart backoff. */
  stableAfterMs: number;
  stopGraceMs: number;
  reportState: (state: RuntimeState, message?: string) => void;
  /**
   * Runs once before the first OpenCode starts (e.g. to fill `env`), while the bootstrap claim is
   * answered: the claim, this and OpenCode's start are independent.
   */
  beforeLaunch?: () => Promise<void>;
  /**
   * Resolves once a healthy runtime's events are followed. HEALTHY is reported, and the initial
   * prompt sent, only then: a turn that starts earlier would run unseen.
   */
  observed?: (proc: OpencodeProcess) => Promise<void>;
  /** Backoff waits, the stability timer and restart times read it. @default systemClock */
  clock?: Clock;
}

export interface RestartRecord {
  at: number;
  delayMs: number;
  reason: string;
}

export interface SupervisorEvents {
  healthy: [OpencodeProcess];
  exit: [OpencodeProcess];
}

export class Supervisor extends EventEmitter<SupervisorEvents> {
  bootstrap: Bootstrap | null = null;
  current: OpencodeProcess | null = null;
  healthy = false;
  /** OpenCode session id the initial prompt went to. */
  initialSessionId: string | null = null;
  /** Settles once the current runtime was reported HEALTHY (see `observed`). */
  ready: Promise<void> = Promise.resolve();
  readonly restarts: RestartRecord[] = [];
  private readonly backoff: Backoff;
  private readonly log: Logger;
  private readonly stopping = new AbortController();
  private stableTimer: ClockTimer | null = null;
  private readonly clock: Clock;
  bin: string;

  constructor(private readonly options: SupervisorOptions) {
    super();
    this.backoff = new Backoff(options.restartBackoff);
    this.log = options.logger.child({ module: 'supervisor' });
    this.bin = options.bin;
    this.clock = options.clock ?? systemClock;
  }

  get stopped(): boolean {
    return this.stopping.signal.aborted;
  }

  /** The port OpenCode is configured to listen on (4096 in images; the provider's choice locally). */
  get port(): number {
    return this.options.port;
  }

  /**
   * beforeLaunch → opencode serve → healthy → HEALTHY, while claimBootstrap is answered; then the
   * initial prompt. OpenCode needs nothing from the claim, and its start is the longest step of a
   * sandbox's readiness: it no longer waits for the claim's round trip.
   */
  async boot(): Promise<void> {
    const claimed = this.claim().then((bootstrap) => {
      this.bootstrap = bootstrap;
      return bootstrap;
    });
    try {
      await this.options.beforeLaunch?.();
    } catch (error) {
      // Failed, but only once the claim is answered: nothing of the boot is left in flight.
      await claimed;
      throw error;
    }
    const launched = this.launch();
    launched.catch(() => {}); // awaited below, once the claim is answered
    const bootstrap = await claimed;
    await launched;
    if (!bootstrap || !this.healthy) return;
    await this.ready;
    await this.sendInitialPrompt();
  }

  private async claim(): Promise<Bootstrap | null> {
    const backoff = new Backoff(this.options.restartBackoff);
    while (!this.stopped) {
      try {
        const bootstrap = await this.options.api.claimBootstrap();
        this.log.info(
          {
            sandboxId: bootstrap.sandboxId,
            alreadyClaimed: bootstrap.alreadyClaimed,
            hasPrompt: !!bootstrap.prompt,
          },
          'bootstrap claimed',
        );
        return bootstrap;
      } catch (error) {
        const delayMs = backoff.next();
        this.log.warn({ err: (error as Error).message, delayMs }, 'claimBootstrap failed; retrying');
        await sleep(delayMs, this.stopping.signal, this.clock);
      }
    }
    return null;
  }

  /** OpenCode processes spawned and not yet exited (the current one, a reload's replacement). */
  private readonly runtimes = new Set<OpencodeProcess>();

  /** Ports OpenCode listens on or is about to: the configured one and every live runtime's. */
  runtimePorts(): number[] {
    return [this.options.port, ...[...this.runtimes].map((r) => r.port)];
  }

  /** Spawns an `opencode serve` with the supervisor's settings (used for restarts and reload replacements). */
  spawnRuntime(port: number, bin: string = this.bin): OpencodeProcess {
    const runtime = this.createRuntime(port, bin);
    this.runtimes.add(runtime);
    void runtime.exited.then(() => this.runtimes.delete(runtime));
    return runtime;
  }

  private createRuntime(port: number, bin: string): OpencodeProcess {
    return new OpencodeProcess({
      bin,
      port,
      workspace: this.options.workspace,
      home: this.options.home,
      configDir: this.options.configDir,
      env: this.options.env,
      logger: this.options.logger,
    });
  }

  /** Starts OpenCode on the main port until it is healthy, restarting with backoff on failure. */
  private async launch(reason = 'boot'): Promise<void> {
    while (!this.stopped) {
      this.options.reportState('STARTING');
      const proc = this.spawnRuntime(this.options.port);
      this.current = proc;
      this.log.info({ pid: proc.pid, port: proc.port, reason }, 'opencode starting');
      try {
        await proc.waitHealthy(this.options.healthTimeoutMs, this.options.healthPollMs, this.stopping.signal);
      } catch (error) {
        await proc.stop(this.options.stopGraceMs);
        if (this.stopped) return;
        reason = (error as Error).message;
        this.options.reportState('ERROR', `OpenCode failed to start: ${reason}`);
        await this.waitBeforeRestart(reason);
        continue;
      }
      this.adopt(proc);
      return;
    }
  }

  /** Makes `proc` the supervised runtime: watch its exit, report HEALTHY once its events are followed. */
  adopt(proc: OpencodeProcess): void {
    this.current = proc;
    this.healthy = true;
    this.log.info({ pid: proc.pid, port: proc.port }, 'opencode healthy');
    this.stableTimer?.cancel();
    this.stableTimer = this.clock.setTimeout(() => this.backoff.reset(), this.options.stableAfterMs).unref();
    this.emit('healthy', proc);
    this.ready = Promise.resolve(this.options.observed?.(proc)).then(() => {
      if (this.current === proc && this.healthy && !this.stopped) this.options.reportState('HEALTHY');
    });
    void proc.exited.then((exit) => {
      if (this.current !== proc || this.stopped) return;
      this.healthy = false;
      this.stableTimer?.cancel();
      this.emit('exit', proc);
      const why = `OpenCode exited (code ${exit.code}, signal ${exit.signal})`;
      this.log.warn({ pid: proc.pid, ...exit }, 'opencode died; restarting');
      this.options.reportState('ERROR', `${why}; restarting`);
      void this.waitBeforeRestart(why).then(() => this.launch(why));
    });
  }

  /** Swaps the supervised runtime for an already-healthy replacement (reload); the caller stops the old one. */
  swap(proc: OpencodeProcess): OpencodeProcess | null {
    const old = this.current;
    this.adopt(proc);
    return old;
  }

  private async waitBeforeRestart(reason: string): Promise<void> {
    const delayMs = this.backoff.next();
    this.restarts.push({ at: this.clock.now(), delayMs, reason });
    this.log.info({ delayMs, attempt: this.backoff.attempts }, 'opencode restart scheduled');
    await sleep(delayMs, this.stopping.signal, this.clock);
  }

  private async sendInitialPrompt(): Promise<void> {
    const bootstrap = this.bootstrap;
    if (!bootstrap || bootstrap.alreadyClaimed || !bootstrap.prompt || !this.current) return;
    try {
      const session = await this.current.client.createSession();
      await this.current.client.promptAsync(session.id, bootstrap.prompt);
      this.initialSessionId = session.id;
      this.log.info(
        { opencodeSessionId: session.id, turnLedgerId: bootstrap.turnLedgerId },
        'initial prompt sent',
      );
    } catch (error) {
      this.log.error({ err: (error as Error).message }, 'initial prompt failed');
      this.options.reportState('ERROR', `Initial prompt could not be sent: ${(error as Error).message}`);
    }
  }

  async stop(): Promise<void> {
    this.stopping.abort();
    this.stableTimer?.cancel();
    this.healthy = false;
    await this.current?.stop(this.options.stopGraceMs);
  }
}
