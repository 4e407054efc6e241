#!/usr/bin/env node
// `singulacomp` as installed by npm: loads the TypeScript sources through tsx (the package ships
// its sources; see server/app.ts for the same in-process loader).
import { register } from 'tsx/esm/api';

register();
await import('./main.ts');
