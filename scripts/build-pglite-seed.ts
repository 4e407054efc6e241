// Builds the embedded database's seed (server/pglite-seed.ts) so the first `npm start` copies a
// migrated data directory instead of running PGlite's initdb. Run by `npm install` (generate).
import { buildPgliteSeed } from '../server/pglite-seed';

const started = Date.now();
const dir = await buildPgliteSeed();
console.log(`embedded database seed ready in ${Date.now() - started} ms (${dir})`);
