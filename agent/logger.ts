// The daemon's logger: one JSON object per line on stdout, in pino's shape (`level` as pino's
// number, `time` in epoch ms, `pid`, `hostname`, `name`, bindings, fields, `msg`), so the same
// tools read the daemon's lines and the server's. It is written here rather than taken from pino
// because pino and its helpers (redaction compiler, sonic-boom, thread-stream) cost the daemon
// about 4.6 MiB of resident memory in every sandbox, for the handful of calls the daemon makes.
import { hostname } from 'node:os';

/** pino's level numbers; `silent` logs nothing. */
const LEVELS = { trace: 10, debug: 20, info: 30, warn: 40, error: 50, fatal: 60, silent: Infinity } as const;
export type LevelName = keyof typeof LEVELS;
type Method = Exclude<LevelName, 'silent'>;
type Fields = Record<string, unknown>;

interface LogFn {
  (fields: Fields, msg?: string): void;
  (msg: string): void;
}

export interface Logger {
  readonly level: LevelName;
  trace: LogFn;
  debug: LogFn;
  info: LogFn;
  warn: LogFn;
  error: LogFn;
  fatal: LogFn;
  /** A logger whose lines also carry `bindings`. */
  child(bindings: Fields): Logger;
}

/**
 * Fields replaced with `[redacted]`: bearer tokens, user-context headers, the sandbox token. A
 * path is a field at the top of a line's fields, or (`*.`) one level below any of them.
 */
export const REDACT_PATHS = [
  'token',
  '*.token',
  'authorization',
  '*.authorization',
  'headers.authorization',
  '*.headers.authorization',
  'headers.x-singulacomp-user-context',
  '*.headers.x-singulacomp-user-context',
  'env.SINGULACOMP_TOKEN',
  '*.env.SINGULACOMP_TOKEN',
] as const;

const CENSOR = '[redacted]';
const RULES = REDACT_PATHS.map((path) => path.split('.'));

/** A copy of `value` with `path` (from segment `at`) censored; `value` itself is never changed. */
function censor(value: unknown, path: string[], at: number): unknown {
  if (typeof value !== 'object' || value === null || Array.isArray(value)) return value;
  const key = path[at]!;
  const source = value as Fields;
  if (key === '*') {
    let copy: Fields | null = null;
    for (const [k, v] of Object.entries(source)) {
      const next = censor(v, path, at + 1);
      if (next === v) continue;
      copy ??= { ...source };
      copy[k] = next;
    }
    return copy ?? value;
  }
  if (!Object.hasOwn(source, key)) return value;
  const next = at === path.length - 1 ? CENSOR : censor(source[key], path, at + 1);
  return next === source[key] ? value : { ...source, [key]: next };
}

function redact(fields: Fields): Fields {
  let out: unknown = fields;
  for (const rule of RULES) out = censor(out, rule, 0);
  return out as Fields;
}

/** An Error as pino's standard serializer writes it; other values as they are. */
function plain(_key: string, value: unknown): unknown {
  if (value instanceof Error) return { type: value.name, message: value.message, stack: value.stack };
  if (typeof value === 'bigint') return value.toString();
  return value;
}

function line(level: number, base: Fields, fields: Fields | undefined, msg: string | undefined): string {
  const record: Fields = { level, time: Date.now(), ...base };
  if (fields) Object.assign(record, redact(fields));
  if (msg !== undefined) record.msg = msg;
  try {
    return `${JSON.stringify(record, plain)}\n`;
  } catch (error) {
    // A cycle or a throwing getter in the fields: keep the line and say why its fields are missing.
    return `${JSON.stringify({ level, time: record.time, ...base, msg, logError: (error as Error).message })}\n`;
  }
}

export interface LoggerOptions {
  /** Where lines go. @default process.stdout, until it fails */
  write?: (line: string) => void;
}

let stdoutFailed = false;
let watchingStdout = false;

/**
 * Lines to stdout while it works. A LOCAL daemon's stdout is a pipe to the server that started it;
 * when that server exits the pipe breaks (EPIPE), and an unhandled stream error would end the
 * daemon with it. As with pino, a failed stdout ends the log, not the daemon.
 */
function writeStdout(text: string): void {
  if (stdoutFailed) return;
  if (!watchingStdout) {
    watchingStdout = true;
    process.stdout.on('error', () => {
      stdoutFailed = true;
    });
  }
  process.stdout.write(text);
}

export function createLogger(level: string = 'info', options: LoggerOptions = {}): Logger {
  if (!Object.hasOwn(LEVELS, level)) throw new Error(`unknown log level "${level}"`);
  const threshold = LEVELS[level as LevelName];
  const write = options.write ?? writeStdout;
  const make = (base: Fields): Logger => {
    const method = (name: Method): LogFn => {
      const value = LEVELS[name];
      if (value < threshold) return () => {};
      return ((first: Fields | string, msg?: string) => {
        if (typeof first === 'string') write(line(value, base, undefined, first));
        else write(line(value, base, first, msg));
      }) as LogFn;
    };
    return {
      level: level as LevelName,
      trace: method('trace'),
      debug: method('debug'),
      info: method('info'),
      warn: method('warn'),
      error: method('error'),
      fatal: method('fatal'),
      child: (bindings) => make({ ...base, ...redact(bindings) }),
    };
  };
  return make({ pid: process.pid, hostname: hostname(), name: 'singulacomp-agent' });
}
