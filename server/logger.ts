import pino, { type Logger } from 'pino';
import pretty from 'pino-pretty';
import { currentRequestId } from './faults';

export interface LoggerOptions {
  /** @default 'json' */
  format?: 'pretty' | 'json';
}

/**
 * Root logger; modules take `logger.child({ module })`. Tokens and credentials never reach a log
 * line. `pretty` formats in this thread (synchronously, no transport worker to start) for a person
 * at a terminal; `json` is for log collectors.
 */
export function createLogger(level: string, options: LoggerOptions = {}): Logger {
  const settings = {
    level,
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
    // A line logged while serving a request (or a job started by one) carries its x-request-id.
    mixin: () => {
      const requestId = currentRequestId();
      return requestId ? { requestId } : {};
    },
  };
  if (options.format !== 'pretty') return pino(settings);
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
