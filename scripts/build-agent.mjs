// Bundles the daemon into one JavaScript file that plain `node` runs (no tsx, no node_modules at run
// time): dist/singulacomp-agent.mjs. The LOCAL provider launches it, and the image's runtime layer
// installs the same file as /usr/local/bin/singulacomp-agent. See scripts/bundles.mjs.
import { AGENT, buildBundle } from './bundles.mjs';

const ms = await buildBundle(AGENT);
if (process.argv.includes('--verbose')) console.log(`${AGENT.outfile} built in ${ms} ms`);
