// The first admin of a fresh install (R-RUN-1): a TEAM account and its user, whose token is returned
// once and written to <data dir>/bootstrap-token (mode 0600) for scripts. Not the sandbox's claim of
// its own start-up data (resolvers/daemon/claim.ts).
import { writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { retry } from '../contract/retry';
import type { Services } from '../resolvers/services';
import type { Logger } from './logger';

/** Attempts before start-up fails, and the first pause between them (doubling). */
const ATTEMPTS = 5;
const FIRST_PAUSE_MS = 200;

/**
 * The admin's token when this process created it; null when the database already had users.
 * A database error (a busy pool, a dropped connection) is retried and, if it persists, fails the
 * start: taken for "users exist", it would leave a fresh install with no admin and no token file.
 */
export async function createBootstrapAdmin(
  services: Services,
  dataDir: string,
  log: Logger,
): Promise<string | null> {
  const created = await withRetries(() => services.accounts.bootstrap(), log);
  if (!created) return null;
  await writeFile(join(dataDir, 'bootstrap-token'), `${created.secret}\n`, { mode: 0o600 });
  return created.secret;
}

function withRetries<T>(fn: () => Promise<T>, log: Logger): Promise<T> {
  return retry(fn, {
    maxAttempts: ATTEMPTS,
    backoff: { initialMs: FIRST_PAUSE_MS, maxMs: Number.POSITIVE_INFINITY, jitter: 0 },
    exhausted: (error) => new Error('The bootstrap admin could not be created.', { cause: error }),
    onRetry: ({ attempt, delayMs, error }) =>
      log.warn({ err: error, attempt, pauseMs: delayMs }, 'bootstrap admin failed; retrying'),
  });
}
