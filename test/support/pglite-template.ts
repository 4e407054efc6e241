// A migrated PGlite data directory shared by the tests: the product's own seed (server/pglite-seed.ts),
// keyed by the PGlite version and the migration files and built at most once across workers.
// startTestApp({ db: 'pglite' }) copies it instead of running initdb, as a first `npm start` does.
import { buildPgliteSeed } from '../../server/pglite-seed';

let template: Promise<string> | null = null;

export function pgliteTemplate(): Promise<string> {
  template ??= buildPgliteSeed();
  return template;
}
