// `npm start`: one server process with embedded defaults (R-RUN-1).
import { buildApp } from './app';

// buildApp logs each start-up step and app.start() the one listening line.
const app = await buildApp();
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
