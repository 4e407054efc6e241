#!/usr/bin/env node
// `singulacomp` as installed by npm: runs dist/singulacomp.mjs, the CLI bundled for plain node at
// install (`npm run generate` → scripts/build-cli.mjs), so no TypeScript loader runs. When any source
// the bundle was built from is newer than it (or it is missing), it is rebuilt first: an edit under
// cli/ or contract/ is never silently ignored.
import { readFileSync, statSync } from 'node:fs';

const bundle = new URL('../dist/singulacomp.mjs', import.meta.url);

function fresh() {
  try {
    const builtAt = statSync(bundle).mtimeMs;
    const inputs = JSON.parse(
      readFileSync(new URL('../dist/singulacomp.inputs.json', import.meta.url), 'utf8'),
    );
    const root = new URL('..', import.meta.url);
    return inputs.every((path) => statSync(new URL(path, root)).mtimeMs <= builtAt);
  } catch {
    return false;
  }
}

if (!fresh()) await (await import('../scripts/build-cli.mjs')).buildCli();
await import(bundle.href);
