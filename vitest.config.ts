import { createRequire } from 'node:module';
import { defineConfig } from 'vitest/config';
import LongFirstSequencer from './test/sequencer';

export default defineConfig({
  resolve: {
    // One graphql module for everyone: Vite would otherwise resolve our sources' `graphql` to
    // index.mjs while externalised packages (yoga, Pothos) load index.js, and yoga's
    // `instanceof GraphQLError` fails for errors we throw (UNAUTHENTICATED became a masked 500).
    alias: [{ find: /^graphql$/, replacement: createRequire(import.meta.url).resolve('graphql') }],
  },
  test: {
    include: ['test/**/*.test.ts'],
    // Backstops only: tests boot real servers, databases and `opencode serve`, and every step
    // waits for its own condition with its own message (support/wait.ts). On a loaded 2-core
    // machine (load average 17–34) booting OpenCode alone took most of the former 60 s, and with
    // two suites at once a reload through the CLI took over 150 s (it boots OpenCode twice).
    testTimeout: 480_000,
    hookTimeout: 300_000,
    pool: 'forks',
    // A worker process runs one file after another with the modules it already loaded (the app,
    // Prisma, the schema): loading them again for each file cost over two CPU minutes of a run that
    // keeps both cores busy (measured with ~95 files; there are more now). Module-level state outlives a file (the port picker's recent
    // ports, compiled documents); each file starts its own app, database and processes and stops
    // them in its afterAll.
    isolate: false,
    // 2-core CI machine: real databases, git and opencode processes. Four files at once keep both
    // cores busy for most of a run (vmstat: 85–99 %) while the long files wait on OpenCode boots and
    // real daemon processes (idle timeouts and lease TTLs pass on test clocks); more workers would
    // only queue on the CPU.
    maxWorkers: 4,
    globalSetup: ['test/global-setup.ts'],
    sequence: { sequencer: LongFirstSequencer },
    reporters: ['default'],
  },
});
