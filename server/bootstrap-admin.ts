// The first admin of a fresh install (R-RUN-1): a TEAM account and its user, whose token is returned
// once and written to <data dir>/bootstrap-token (mode 0600) for scripts. Not the sandbox's claim of
// its own start-up data (resolvers/daemon/claim.ts).
import { writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import type { Services } from '../resolvers/services';
import type { Logger } from './logger';

/** The admin's token when this process created it; null when the database already had users. */
export async function createBootstrapAdmin(
  services: Services,
  dataDir: string,
  log: Logger,
): Promise<string | null> {
  const created = await services.accounts.bootstrap().catch((error: unknown) => {
    // Another process won the race for the first admin.
    log.debug({ err: error }, 'bootstrap admin skipped');
    return null;
  });
  if (!created) return null;
  await writeFile(join(dataDir, 'bootstrap-token'), `${created.secret}\n`, { mode: 0o600 });
  return created.secret;
}
