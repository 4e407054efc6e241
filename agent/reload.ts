// R-AG-7: replaces the OpenCode runtime only after the replacement is healthy, reporting every
// phase through reportReloadPhase. A reload ends the current turn. The replacement proves itself on
// a temporary port while the old runtime still serves; after the swap OpenCode moves back to its
// configured port (see moveToConfiguredPort).
import { execFile } from 'node:child_process';
import { readFile } from './fs';
import { join } from 'node:path';
import { promisify } from 'node:util';
import type { ApiClient, ReloadPhaseName } from './api-client';
import type { TurnTracker } from './events';
import type { Logger } from './logger';
import { freePort } from '../contract/ports';
import type { OpencodeProcess } from './opencode';
import type { Supervisor } from './supervisor';

const exec = promisify(execFile);

export interface ReloadRequest {
  reloadId: string;
  noRepo?: boolean;
  force?: boolean;
}

export interface ReloadOptions {
  api: ApiClient;
  logger: Logger;
  supervisor: Supervisor;
  tracker: TurnTracker;
  workspace: string;
  configDir: string;
  branchName: string;
  /** Health deadline for the replacement runtime. @default 60_000 */
  validateTimeoutMs: number;
  healthPollMs: number;
  stopGraceMs: number;
  /** Called after the swap so the event stream follows the new runtime. */
  onSwap: (proc: OpencodeProcess) => void;
  /** Binary for replacements; default: the supervisor's. Tests point it at a broken one. */
  replacementBin?: () => string | undefined;
}

export interface ReloadOutcome {
  reloadId: string;
  ok: boolean;
  failedPhase?: ReloadPhaseName;
  message?: string;
}

class PhaseError extends Error {}

/** Strips // and /* *\/ comments and trailing commas (opencode.jsonc). */
function parseJsonc(text: string): unknown {
  const noComments = text.replace(
    /("(?:\\.|[^"\\])*")|\/\/[^\n]*|\/\*[\s\S]*?\*\//g,
    (_m, str: string) => str ?? '',
  );
  return JSON.parse(noComments.replace(/,(\s*[}\]])/g, '$1'));
}

/** Reads and validates the project's OpenCode config; throws with the reason when it is broken. */
export async function compileAgentConfig(configDir: string): Promise<{ path: string | null }> {
  for (const name of ['opencode.json', 'opencode.jsonc']) {
    const path = join(configDir, name);
    let text: string;
    try {
      text = await readFile(path, 'utf8');
    } catch {
      continue;
    }
    let config: unknown;
    try {
      config = parseJsonc(text);
    } catch (error) {
      throw new Error(`${path} is not valid JSON: ${(error as Error).message}`);
    }
    if (typeof config !== 'object' || config === null || Array.isArray(config)) {
      throw new Error(`${path} must hold a JSON object`);
    }
    return { path };
  }
  return { path: null };
}

export class Reloader {
  private active: Promise<ReloadOutcome> | null = null;
  readonly outcomes: ReloadOutcome[] = [];
  private readonly log: Logger;

  constructor(private readonly options: ReloadOptions) {
    this.log = options.logger.child({ module: 'reload' });
  }

  get busy(): boolean {
    return this.active !== null;
  }

  /** Starts a reload in the background; returns false when one is already running. */
  begin(request: ReloadRequest): Promise<ReloadOutcome> | null {
    if (this.active) return null;
    const run = this.run(request).finally(() => {
      this.active = null;
    });
    this.active = run;
    return run;
  }

  private async phase<T>(
    reloadId: string,
    track: { phase: ReloadPhaseName },
    phase: ReloadPhaseName,
    work: () => Promise<T>,
    note?: (value: T) => string | undefined,
  ): Promise<T> {
    track.phase = phase;
    await this.report(reloadId, phase, 'STARTED');
    try {
      const value = await work();
      await this.report(reloadId, phase, 'SUCCEEDED', note?.(value));
      return value;
    } catch (error) {
      const message = (error as Error).message;
      await this.report(reloadId, phase, 'FAILED', message);
      throw new PhaseError(`${phase}: ${message}`);
    }
  }

  private async report(
    reloadId: string,
    phase: ReloadPhaseName,
    status: 'STARTED' | 'SUCCEEDED' | 'FAILED',
    message?: string,
  ): Promise<void> {
    this.log.info({ reloadId, phase, status, message }, 'reload phase');
    try {
      await this.options.api.reportReloadPhase({ reloadId, phase, status, message });
    } catch (error) {
      this.log.warn({ err: (error as Error).message, reloadId, phase }, 'reportReloadPhase failed');
    }
  }

  /** Healthy, and loads its config: OpenCode answers /global/health even when its config fails its own schema. */
  private async validate(proc: OpencodeProcess): Promise<void> {
    await proc.waitHealthy(this.options.validateTimeoutMs, this.options.healthPollMs);
    try {
      await proc.client.config();
    } catch (error) {
      throw new Error(`the replacement cannot load its config: ${(error as Error).message}`);
    }
  }

  /** Ends the turns on the current runtime, makes `next` the supervised one and stops the old one. */
  private async swapTo(next: OpencodeProcess): Promise<void> {
    const { supervisor, tracker } = this.options;
    const old = supervisor.current;
    for (const id of tracker.inFlight()) await old?.client.abort(id).catch(() => false);
    supervisor.swap(next);
    tracker.endAll('idle');
    this.options.onSwap(next);
    await old?.stop(this.options.stopGraceMs);
  }

  /**
   * OpenCode keeps its configured port across reloads (the image contract is `--port 4096`). The
   * validated replacement serves from its temporary port while a second one starts on the configured
   * port, which the stopped old runtime freed; once that one is healthy with its config, it takes
   * over. Should it fail, the validated replacement keeps serving and the supervisor's next restart
   * returns to the configured port.
   */
  private async moveToConfiguredPort(
    serving: OpencodeProcess,
    bin: string,
  ): Promise<{ serving: OpencodeProcess; note?: string }> {
    const { supervisor } = this.options;
    if (serving.port === supervisor.port) return { serving };
    const settled = supervisor.spawnRuntime(supervisor.port, bin);
    try {
      await this.validate(settled);
    } catch (error) {
      await settled.stop(this.options.stopGraceMs);
      const note = `OpenCode serves on port ${serving.port} until its next restart: port ${supervisor.port} did not come up (${(error as Error).message})`;
      this.log.warn({ port: supervisor.port, temporaryPort: serving.port }, note);
      return { serving, note };
    }
    if (supervisor.current !== serving || supervisor.stopped) {
      // The replacement died (the supervisor restarts on the configured port) or the daemon stops.
      await settled.stop(this.options.stopGraceMs);
      return { serving: supervisor.current ?? serving };
    }
    await this.swapTo(settled);
    return { serving: settled };
  }

  private async run(request: ReloadRequest): Promise<ReloadOutcome> {
    const { reloadId } = request;
    const { supervisor, tracker } = this.options;
    let replacement: OpencodeProcess | null = null;
    const track: { phase: ReloadPhaseName } = { phase: 'CHECK_SESSION' };
    try {
      await this.phase(reloadId, track, 'CHECK_SESSION', async () => {
        if (supervisor.stopped) throw new Error('the daemon is shutting down');
        if (!supervisor.current?.alive) throw new Error('OpenCode is not running; retry once it restarted');
        if (tracker.turnInFlight && !request.force) {
          throw new Error('a turn is in progress; reload with force to end it');
        }
      });
      if (!request.noRepo) {
        await this.phase(reloadId, track, 'REFRESH_REPOSITORY', async () => {
          const cwd = this.options.workspace;
          try {
            await exec('git', ['pull', '--ff-only', 'origin', this.options.branchName], {
              cwd,
              timeout: 120_000,
            });
          } catch (error) {
            const stderr = (error as { stderr?: string }).stderr?.trim();
            throw new Error(`git pull --ff-only failed: ${stderr || (error as Error).message}`);
          }
        });
      }
      await this.phase(reloadId, track, 'COMPILE_AGENT_CONFIG', () =>
        compileAgentConfig(this.options.configDir),
      );
      const bin = this.options.replacementBin?.() ?? supervisor.bin;
      await this.phase(reloadId, track, 'APPLY_RUNTIME', async () => {
        // The old runtime still holds the configured port: the replacement proves itself on a free one.
        replacement = supervisor.spawnRuntime(await freePort(), bin);
      });
      await this.phase(reloadId, track, 'VALIDATE_RUNTIME', async () => {
        await this.validate(replacement!);
      });
      // Healthy replacement: end the current turn on the old runtime, swap, stop the old one.
      const fresh = replacement as unknown as OpencodeProcess;
      replacement = null;
      await this.swapTo(fresh);
      const { note } = await this.phase(
        reloadId,
        track,
        'CONFIRM_CONFIG',
        async () => {
          const moved = await this.moveToConfiguredPort(fresh, bin);
          await moved.serving.client.config();
          return moved;
        },
        (moved) => moved.note,
      );
      const outcome: ReloadOutcome = { reloadId, ok: true, ...(note ? { message: note } : {}) };
      this.outcomes.push(outcome);
      return outcome;
    } catch (error) {
      const stale = replacement as OpencodeProcess | null;
      if (stale) await stale.stop(this.options.stopGraceMs);
      const message = (error as Error).message;
      this.log.warn(
        { reloadId, phase: track.phase, err: message },
        'reload failed; the old runtime keeps serving',
      );
      const outcome: ReloadOutcome = { reloadId, ok: false, failedPhase: track.phase, message };
      this.outcomes.push(outcome);
      return outcome;
    }
  }
}
