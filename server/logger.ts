import { AsyncLocalStorage } from 'node:async_hooks';
import pino, { type DestinationStream, type Logger } from 'pino';
import pretty from 'pino-pretty';

export interface LoggerOptions {
  /** @default 'json' */
  format?: 'pretty' | 'json';
  /** Where JSON lines go. @default stdout */
  destination?: DestinationStream;
}

const requestScope = new AsyncLocalStorage<{ requestId: string }>();

/** Runs fn inside a request: every line logged meanwhile (any module) carries its `requestId`. */
export function withRequestId<T>(requestId: string, fn: () => T): T {
  return requestScope.run({ requestId }, fn);
}

export function currentRequestId(): string | null {
  return requestScope.getStore()?.requestId ?? null;
}

function requestIdMixin(): object {
  const requestId = currentRequestId();
  return requestId ? { requestId } : {};
}

/**
 * Root logger; modules take `logger.child({ module })`. Tokens and credentials never reach a log
 * line. `pretty` formats in this thread (synchronously, no transport worker to start) for a person
 * at a terminal; `json` is for log collectors.
 */
export function createLogger(level: string, options: LoggerOptions = {}): Logger {
  const settings = {
    level,
    mixin: requestIdMixin,
    redact: {
      paths: [
        'req.headers.authorization',
        'headers.authorization',
        'authorization',
        'token',
        'secret',
        '*.token',
        '*.secret',
        'connectionParams.authorization',
      ],
      censor: '[redacted]',
    },
  };
  if (options.format !== 'pretty') {
    return options.destination ? pino(settings, options.destination) : pino(settings);
  }
  return pino(
    settings,
    pretty({
      sync: true,
      colorize: true,
      singleLine: true,
      ignore: 'pid,hostname,module',
      messageFormat: '{if module}[{module}] {end}{msg}',
      translateTime: 'HH:MM:ss.l',
    }),
  );
}

/** The default format for this process: pretty on a terminal outside production, JSON otherwise. */
export function defaultLogFormat(nodeEnv: string): 'pretty' | 'json' {
  return process.stdout.isTTY && nodeEnv !== 'production' ? 'pretty' : 'json';
}

export type { Logger };
