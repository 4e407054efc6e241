// Attack 5: with a valid user-context header, X-SingulaComp-Target-Port tried to reach the control
// plane's port, PostgreSQL, Redis and other host services. The daemon forwards only to ports its own
// process tree listens on.
import { type ChildProcess, spawn } from 'node:child_process';
import { describe } from 'vitest';
import { sandboxListeningPorts } from '../../agent/sandbox-ports';
import { UNREACHABLE_PORT_STATUS, freePort } from '../../contract/ports';
import { expect, test } from '../agent/helpers';
import { waitFor } from '../support/wait';

const HEADER = 'x-singulacomp-user-context';
const LISTEN = (port: number) =>
  `require('node:http').createServer((q, s) => s.end('reached')).listen(${port}, '127.0.0.1')`;

describe('proxy targets', () => {
  test('only ports the sandbox’s own processes listen on are proxied; the API, PostgreSQL, Redis and foreign services are refused', async ({
    startAgent,
  }) => {
    const h = await startAgent();
    const ownPort = await freePort();
    const foreignPort = await freePort();
    // A process of the daemon's tree (as a dev server started by OpenCode would be).
    const own: ChildProcess = spawn(process.execPath, ['-e', LISTEN(ownPort)], { stdio: 'ignore' });
    // A host service outside the tree: the shell exits at once, so its child is reparented away.
    const foreign = spawn('/bin/sh', ['-c', `'${process.execPath}' -e "${LISTEN(foreignPort)}" & echo $!`], {
      stdio: ['ignore', 'pipe', 'ignore'],
    });
    const foreignPid = Number(
      await new Promise<string>((r) => foreign.stdout!.once('data', (d) => r(String(d)))),
    );
    try {
      await waitFor(async () => ((await sandboxListeningPorts()).has(ownPort) ? true : null));
      await waitFor(async () => {
        try {
          return (await fetch(`http://127.0.0.1:${foreignPort}/`)).ok ? true : null;
        } catch {
          return null;
        }
      });
      const via = (port: number) =>
        fetch(`${h.url}/x`, {
          headers: {
            [HEADER]: h.userContext({ audience: 'app', port }),
            'x-singulacomp-target-port': String(port),
          },
        });

      const reached = await via(ownPort);
      expect(reached.status).toBe(200);
      expect(await reached.text()).toBe('reached');

      const apiPort = Number(new URL(h.api.url).port);
      for (const [name, port] of [
        ['a host service outside the sandbox', foreignPort],
        ['PostgreSQL', 5432],
        ['Redis', 6379],
        ['the control plane API', apiPort],
        ['the service port', h.agent.servicePort],
      ] as const) {
        const res = await via(port);
        expect(res.status, name).toBe(UNREACHABLE_PORT_STATUS);
        expect(await res.text(), name).not.toContain('reached');
      }
    } finally {
      own.kill('SIGKILL');
      try {
        process.kill(foreignPid, 'SIGKILL');
      } catch {
        // already gone
      }
    }
  });
});
