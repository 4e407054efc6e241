// Bundles the server into dist/server.mjs, what `npm start` runs (scripts/start.mjs rebuilds it when
// a source changed since). Run by `npm install` (generate). See scripts/bundles.mjs.
import { SERVER, buildBundle } from './bundles.mjs';

const ms = await buildBundle(SERVER);
if (process.argv.includes('--verbose')) console.log(`${SERVER.outfile} built in ${ms} ms`);
