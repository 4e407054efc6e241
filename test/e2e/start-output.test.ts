// Every start says where the admin token is, not only the first: a newcomer who restarts the server
// has lost the first start's output. In development it also prints the signed-in dashboard and
// GraphiQL links again, read from the token file.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, expect, test } from 'vitest';
import { type ServerProcess, startServerProcess } from '../support/server-process';
import { waitFor } from '../support/wait';

const dataDir = mkdtempSync(join(tmpdir(), 'sc-start-output-'));
const servers: ServerProcess[] = [];
afterAll(async () => {
  for (const server of servers) await server.stop();
  rmSync(dataDir, { recursive: true, force: true });
});

async function start(env: Record<string, string>): Promise<ServerProcess> {
  const server = await startServerProcess({ dataDir, logLevel: 'info', env });
  servers.push(server);
  await waitFor(() => server.output().includes('"msg":"listening"'), 30_000, 'the listening line');
  return server;
}

test('a second start prints the token file and, in development, the signed-in links', async () => {
  const tokenFile = join(dataDir, 'bootstrap-token');
  const first = await start({ NODE_ENV: 'development' });
  const token = first.bootstrapToken();
  expect(token).toMatch(/^singulacomp_pat_/);
  expect(first.output()).toContain(`also in ${tokenFile}`);
  await first.stop();

  const second = await start({ NODE_ENV: 'development' });
  const output = second.output();
  expect(output).toContain(`SingulaComp admin token: in ${tokenFile}`);
  expect(output).toContain(`Dashboard, token filled in: ${second.url}/?token=${token}`);
  expect(output).toContain(`GraphiQL, signed in: ${second.url}/graphql?token=${token}`);
  // The token itself is printed on the first start only; later it is in the links and the file.
  expect(output).not.toContain('shown once');
  await second.stop();

  // In production: where the file is, never a link carrying the token.
  const production = await start({
    NODE_ENV: 'production',
    SINGULACOMP_LOCAL_ISOLATION: 'none',
    SINGULACOMP_PREVIEW_DOMAIN: 'preview.example.test',
  });
  expect(production.output()).toContain(`SingulaComp admin token: in ${tokenFile}`);
  expect(production.output()).not.toContain(token!);
});
