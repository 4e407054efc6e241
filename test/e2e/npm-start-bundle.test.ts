// `npm start` runs the server from its bundle (dist/server.mjs, scripts/start.mjs): in a copy of this
// checkout (node_modules linked, so the copy is cheap) it serves GraphiQL's assets, the dashboard and
// the API from the bundle's location; an untouched tree reuses the bundle, and a source edit is
// what the next `npm start` runs.
import { appendFileSync, cpSync, mkdtempSync, readFileSync, rmSync, statSync, symlinkSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, relative } from 'node:path';
import { afterAll, expect, test } from 'vitest';
import { type ServerProcess, postGraphql, startServerProcess } from '../support/server-process';
import { waitFor } from '../support/wait';

const ROOT = new URL('../..', import.meta.url).pathname;
const SKIPPED = new Set([
  'node_modules',
  '.git',
  '.tools',
  '.data',
  '.tmp',
  'coverage',
  'test',
  'web',
  'docs',
  'bench',
]);

const checkout = mkdtempSync(join(tmpdir(), 'sc-start-bundle-'));
const servers: ServerProcess[] = [];
afterAll(async () => {
  for (const server of servers) await server.stop();
  rmSync(checkout, { recursive: true, force: true });
});

function start(): Promise<ServerProcess> {
  return startServerProcess({ npmStart: true, cwd: checkout, logLevel: 'info' }).then((server) => {
    servers.push(server);
    return server;
  });
}

test('npm start serves from the bundle, reuses it while the sources are unchanged, and rebuilds it after an edit', async () => {
  // Timestamps kept: the copied bundle is as fresh against its copied sources as the original.
  cpSync(ROOT, checkout, {
    recursive: true,
    preserveTimestamps: true,
    filter: (src) => !SKIPPED.has(relative(ROOT, src).split('/')[0]!),
  });
  symlinkSync(join(ROOT, 'node_modules'), join(checkout, 'node_modules'));
  const bundle = join(checkout, 'dist', 'server.mjs');
  const builtAt = statSync(bundle).mtimeMs;

  const first = await start();
  expect(first.output()).not.toContain('rebuilt');
  expect(statSync(bundle).mtimeMs).toBe(builtAt);
  // Files found relative to the sources, from the bundle: the migrations (the database started),
  // GraphiQL's assets, the dashboard, the daemon bundle and CLI in LOCAL sandboxes' commands.
  const page = await (await fetch(first.graphqlUrl, { headers: { accept: 'text/html' } })).text();
  const asset = /\/graphiql\/[^"']+\/graphiql\.js/.exec(page)?.[0];
  expect(asset).toBeDefined();
  expect((await fetch(`${first.url}${asset}`)).status).toBe(200);
  const dashboard = await fetch(`${first.url}/`, { headers: { accept: 'text/html' } });
  expect(await dashboard.text()).toContain('<title>SingulaComp</title>');
  expect(readFileSync(join(first.dataDir, 'bin', 'singulacomp'), 'utf8')).toContain(
    join(checkout, 'dist/singulacomp.mjs'),
  );
  // One graphql module in the bundle: our errors keep their code instead of a masked 500.
  const anonymous = await postGraphql(first.graphqlUrl, { query: '{ viewer { kind } }' }, null);
  expect(anonymous.json.errors?.[0]?.extensions?.code).toBe('UNAUTHENTICATED');
  await first.stop();

  appendFileSync(join(checkout, 'server', 'main.ts'), "process.stdout.write('edited main.ts runs\\n');\n");
  const second = await start();
  expect(second.output()).toMatch(/dist\/server\.mjs rebuilt in \d+ ms \(server\/main\.ts changed\)/);
  await waitFor(() => second.output().includes('edited main.ts runs'), 30_000, 'the edited main.ts line');
});
