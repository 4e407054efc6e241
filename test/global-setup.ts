// Runs once before the suite: the generated clients must exist (npm install runs `generate`), and the
// daemon bundle LOCAL sandboxes run is rebuilt from the current agent/ sources.
import { spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';

export default function setup(): void {
  if (!existsSync(new URL('../prisma/generated/client/client.ts', import.meta.url))) {
    throw new Error('Prisma client not generated: run `npm run generate` (npm install does it).');
  }
  const bundle = spawnSync(process.execPath, ['scripts/build-agent.mjs'], {
    cwd: new URL('..', import.meta.url).pathname,
    stdio: 'inherit',
  });
  if (bundle.status !== 0) throw new Error('Building dist/singulacomp-agent.mjs failed.');
}
