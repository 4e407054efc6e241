// R-AG-4: box memory, cgroup limit, load, disk, daemon and OpenCode RSS, pushed through
// reportTelemetry every `intervalMs` and on every OpenCode state change.
import { readSmallText, statfs } from './fs';
import { join } from 'node:path';
import type { ApiClient, TelemetryInput, TelemetryReason } from './api-client';
import type { Logger } from './logger';

export interface MemoryReading {
  usedBytes: number;
  limitBytes: number;
}

/** Where readings come from; tests inject their own. */
export interface SystemReaders {
  memory(): Promise<MemoryReading>;
  load1(): Promise<number>;
  disk(path: string): Promise<{ usedBytes: number; totalBytes: number }>;
  daemonRss(): Promise<number>;
  processRss(pid: number): Promise<number>;
}

export interface SystemReaderOptions {
  /** @default '/proc' */
  procRoot?: string;
  /** @default '/sys/fs/cgroup' */
  cgroupRoot?: string;
}

async function readText(path: string): Promise<string | null> {
  try {
    return await readSmallText(path);
  } catch {
    return null;
  }
}

/** Parses /proc/meminfo into bytes per key. */
export function parseMeminfo(text: string): Record<string, number> {
  const out: Record<string, number> = {};
  for (const line of text.split('\n')) {
    const match = /^(\w+(?:\(\w+\))?):\s+(\d+)(?:\s+kB)?/.exec(line);
    if (match) out[match[1]!] = Number(match[2]) * (line.includes('kB') ? 1024 : 1);
  }
  return out;
}

/** A cgroup memory limit, or null when unlimited ('max' or a v1 "no limit" sentinel). */
export function parseCgroupLimit(text: string | null, boxTotalBytes: number): number | null {
  if (text === null) return null;
  const value = text.trim();
  if (value === '' || value === 'max') return null;
  const bytes = Number(value);
  // cgroup v1 reports "unlimited" as a page-rounded 2^63-1.
  if (!Number.isFinite(bytes) || bytes <= 0 || bytes >= boxTotalBytes) return null;
  return bytes;
}

export function createSystemReaders(options: SystemReaderOptions = {}): SystemReaders {
  const proc = options.procRoot ?? '/proc';
  const cgroup = options.cgroupRoot ?? '/sys/fs/cgroup';
  const rssOf = async (pid: number | 'self'): Promise<number> => {
    const status = await readText(join(proc, String(pid), 'status'));
    const match = status ? /^VmRSS:\s+(\d+)\s+kB/m.exec(status) : null;
    return match ? Number(match[1]) * 1024 : 0;
  };
  return {
    async memory() {
      const info = parseMeminfo((await readText(join(proc, 'meminfo'))) ?? '');
      const total = info.MemTotal ?? 0;
      const boxUsed = total - (info.MemAvailable ?? info.MemFree ?? 0);
      const v2 = parseCgroupLimit(await readText(join(cgroup, 'memory.max')), total);
      const v1 =
        v2 ?? parseCgroupLimit(await readText(join(cgroup, 'memory', 'memory.limit_in_bytes')), total);
      if (v1 === null) return { usedBytes: boxUsed, limitBytes: total };
      const current =
        (await readText(join(cgroup, 'memory.current'))) ??
        (await readText(join(cgroup, 'memory', 'memory.usage_in_bytes')));
      const cgroupUsed = current === null ? Number.NaN : Number(current.trim());
      return { usedBytes: Number.isFinite(cgroupUsed) ? cgroupUsed : boxUsed, limitBytes: v1 };
    },
    async load1() {
      const text = await readText(join(proc, 'loadavg'));
      return text ? Number(text.split(' ')[0]) || 0 : 0;
    },
    async disk(path) {
      const stats = await statfs(path);
      const totalBytes = stats.blocks * stats.bsize;
      return { totalBytes, usedBytes: totalBytes - stats.bfree * stats.bsize };
    },
    daemonRss: () => rssOf('self'),
    processRss: (pid) => rssOf(pid),
  };
}

export interface TelemetryOptions {
  api: ApiClient;
  logger: Logger;
  readers: SystemReaders;
  workspace: string;
  /** @default 60_000 */
  intervalMs: number;
  sandboxId: () => string | null;
  opencodePid: () => number | undefined;
}

export class Telemetry {
  private timer: NodeJS.Timeout | null = null;
  private readonly log: Logger;
  last: TelemetryInput | null = null;
  /** Interval ticks skipped because a report was still on its way. */
  skipped = 0;
  /** Reports sampled and not yet settled (sent, or given up on). */
  private pending = 0;
  /** The last report's send: reports go out one at a time, in order. */
  private tail: Promise<unknown> = Promise.resolve();

  constructor(private readonly options: TelemetryOptions) {
    this.log = options.logger.child({ module: 'telemetry' });
  }

  start(): void {
    if (this.timer) return;
    this.timer = setInterval(() => void this.report('INTERVAL'), this.options.intervalMs);
    this.timer.unref();
  }

  stop(): void {
    if (this.timer) clearInterval(this.timer);
    this.timer = null;
  }

  async sample(reason: TelemetryReason): Promise<TelemetryInput | null> {
    const sandboxId = this.options.sandboxId();
    if (!sandboxId) return null;
    const { readers } = this.options;
    const pid = this.options.opencodePid();
    const [memory, load1, disk, daemonRssBytes, opencodeRssBytes] = await Promise.all([
      readers.memory(),
      readers.load1(),
      readers.disk(this.options.workspace).catch(() => ({ usedBytes: 0, totalBytes: 0 })),
      readers.daemonRss(),
      pid === undefined ? Promise.resolve(0) : readers.processRss(pid),
    ]);
    return {
      sandboxId,
      memoryUsedBytes: memory.usedBytes,
      memoryLimitBytes: memory.limitBytes,
      load1,
      diskUsedBytes: disk.usedBytes,
      diskTotalBytes: disk.totalBytes,
      daemonRssBytes,
      opencodeRssBytes,
      reason,
    };
  }

  /**
   * Samples and pushes one report; failures are logged, never thrown. One report is on its way at a
   * time: against a slow server (each report retries for up to a minute) an interval tick that
   * finds one still pending is skipped, as the next tick samples afresh, and any other report
   * (a state change, the memory guard) is sampled now and sent after it. So a daemon never piles
   * its retries onto a server that is already behind, where they would crowd out lease renewals.
   */
  async report(reason: TelemetryReason): Promise<TelemetryInput | null> {
    if (reason === 'INTERVAL' && this.pending > 0) {
      this.skipped += 1;
      this.log.debug({ pending: this.pending }, 'interval sample skipped: a report is still on its way');
      return null;
    }
    this.pending += 1;
    try {
      const sample = await this.sample(reason);
      if (!sample) return null;
      this.last = sample;
      this.log.info({ resources: sample }, '[resources]');
      const send = this.tail.then(() => this.options.api.reportTelemetry(sample));
      this.tail = send.catch(() => undefined);
      await send;
      return sample;
    } catch (error) {
      this.log.warn({ err: (error as Error).message, reason }, 'telemetry report failed');
      return null;
    } finally {
      this.pending -= 1;
    }
  }
}
