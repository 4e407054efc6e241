// `npm start`: runs the server from its bundle (dist/server.mjs, built by `npm install`), first
// rebuilding it, and the daemon's bundle that LOCAL sandboxes run, when a file either was built
// from changed since (scripts/bundles.mjs): an edited source is what the next start runs. An older
// Node.js than package.json's engines is refused first, in one line, before anything else runs.
import { pathToFileURL } from 'node:url';
import { nodeVersionProblem } from './node-version.mjs';

const problem = nodeVersionProblem(process.versions.node);
if (problem) {
  process.stderr.write(`${problem}\n`);
  process.exit(1);
}

const { AGENT, SERVER, buildBundle, staleReason } = await import('./bundles.mjs');
await Promise.all(
  [AGENT, SERVER].map(async (bundle) => {
    const reason = staleReason(bundle);
    if (!reason) return;
    const ms = await buildBundle(bundle);
    process.stderr.write(`${bundle.outfile} rebuilt in ${ms} ms (${reason})\n`);
  }),
);
await import(pathToFileURL(new URL(`../${SERVER.outfile}`, import.meta.url).pathname).href);
