// Bundles the daemon into one JavaScript file that plain `node` runs (no tsx, no node_modules at run
// time): dist/singulacomp-agent.mjs. The LOCAL provider launches it, and the image's runtime layer
// installs the same file as /usr/local/bin/singulacomp-agent.
import { build } from 'esbuild';

const started = Date.now();
await build({
  entryPoints: [new URL('../agent/main.ts', import.meta.url).pathname],
  outfile: new URL('../dist/singulacomp-agent.mjs', import.meta.url).pathname,
  bundle: true,
  platform: 'node',
  format: 'esm',
  target: 'node22',
  // CommonJS dependencies (http-proxy) call require() for Node's own modules.
  banner: {
    js: "import { createRequire as __createRequire } from 'node:module'; const require = __createRequire(import.meta.url);",
  },
  legalComments: 'none',
  logLevel: 'warning',
});
if (process.argv.includes('--verbose'))
  console.log(`dist/singulacomp-agent.mjs built in ${Date.now() - started} ms`);
