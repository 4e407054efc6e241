// `npm start`: one server process with embedded defaults (R-RUN-1).
import { join } from 'node:path';
import { parseEnv } from './env';
import { seedPgliteDataDir } from './pglite-seed';

const env = parseEnv();
// A first start on the embedded database copies the installed seed on another thread while the
// rest of the server loads; buildApp waits for that copy (and reports a failure of it).
if (!env.databaseUrl) seedPgliteDataDir(join(env.dataDir, 'pglite')).catch(() => {});
const { buildApp } = await import('./app');

// buildApp logs each start-up step and app.start() the one listening line.
const app = await buildApp({ env });
await app.start();

let stopping = false;
const shutdown = (signal: string) => {
  if (stopping) process.exit(1);
  stopping = true;
  process.stdout.write(`${signal}: finishing in-flight requests…\n`);
  app.stop().then(
    () => process.exit(0),
    (error: unknown) => {
      console.error(error);
      process.exit(1);
    },
  );
};
process.on('SIGTERM', () => shutdown('SIGTERM'));
process.on('SIGINT', () => shutdown('SIGINT'));
