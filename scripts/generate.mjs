// Generates the Prisma client, Pothos and GraphQL document types, the daemon, CLI and server
// bundles, the dashboard and the embedded database seed, without downloading anything: Prisma 7's
// CLI wants a schema-engine binary on disk but generation never runs it, so any existing file
// satisfies it.
import { spawnSync } from 'node:child_process';

const env = { ...process.env };
env.PRISMA_SCHEMA_ENGINE_BINARY ??= process.execPath;
env.PRISMA_HIDE_UPDATE_MESSAGE = '1';
env.CHECKPOINT_DISABLE = '1';

const run = (cmd, args) => {
  const r = spawnSync(cmd, args, { stdio: 'inherit', env });
  if (r.status !== 0) process.exit(r.status ?? 1);
};
run('npx', ['--no-install', 'prisma', 'generate']);
// Typed documents for tests and clients, from the committed schema.graphql.
run('npx', ['--no-install', 'graphql-codegen', '--config', 'codegen.ts']);
// The daemon as one file for plain node (LOCAL sandboxes, the image's runtime layer).
run(process.execPath, ['scripts/build-agent.mjs']);
// The CLI likewise (cli/bin.mjs runs it, rebuilding it when a source is newer).
run(process.execPath, ['scripts/build-cli.mjs']);
// The server as one file, what `npm start` runs (it rebuilds this when a source changed since).
run(process.execPath, ['scripts/build-server.mjs']);
// The embedded database's seed: the first `npm start` copies it instead of running initdb.
run(process.execPath, ['--import', 'tsx', 'scripts/build-pglite-seed.ts']);
// The dashboard (web/) into dist/web, served by the server at /: a few seconds, no network.
run('npx', ['--no-install', 'vite', 'build', '--config', 'web/vite.config.ts']);
