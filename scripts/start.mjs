// `npm start`: runs the server from its bundle (dist/server.mjs, built by `npm install`), first
// rebuilding it, and the daemon's bundle that LOCAL sandboxes run, when a file either was built
// from changed since (scripts/bundles.mjs): an edited source is what the next start runs.
import { pathToFileURL } from 'node:url';
import { AGENT, SERVER, buildBundle, staleReason } from './bundles.mjs';

await Promise.all(
  [AGENT, SERVER].map(async (bundle) => {
    const reason = staleReason(bundle);
    if (!reason) return;
    const ms = await buildBundle(bundle);
    process.stderr.write(`${bundle.outfile} rebuilt in ${ms} ms (${reason})\n`);
  }),
);
await import(pathToFileURL(new URL(`../${SERVER.outfile}`, import.meta.url).pathname).href);
