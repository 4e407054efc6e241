// Attack 5: with a valid user-context header, X-SingulaComp-Target-Port tried to reach the control
// plane's port, PostgreSQL, Redis and other host services. The daemon forwards only to ports its own
// process tree listens on.
import { type ChildProcess, spawn } from 'node:child_process';
import { describe } from 'vitest';
import { SandboxPorts, sandboxListeningPorts } from '../../agent/sandbox-ports';
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

/** A listener on `port` outside the test's process tree (its shell exits at once); its pid. */
async function foreignListener(port: number): Promise<number> {
  const shell = spawn('/bin/sh', ['-c', `'${process.execPath}' -e "${LISTEN(port)}" & echo $!`], {
    stdio: ['ignore', 'pipe', 'ignore'],
  });
  return Number(await new Promise<string>((r) => shell.stdout!.once('data', (d) => r(String(d)))));
}

async function reachable(port: number): Promise<true | null> {
  try {
    return (await fetch(`http://127.0.0.1:${port}/`)).ok ? true : null;
  } catch {
    return null;
  }
}

async function exited(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return;
  await new Promise((r) => child.once('exit', r));
}

describe('sandbox ports between full scans', () => {
  // The clock stands still: every answer after the first scan falls inside the window, so a refusal
  // below comes from the per-request check, not from the window running out.
  const frozen = () => 1_000_000;

  test('a port the tree closed, or a process outside the tree took over, is refused at once', async () => {
    const ports = new SandboxPorts({ now: frozen });
    const port = await freePort();
    const own = spawn(process.execPath, ['-e', LISTEN(port)], { stdio: 'ignore' });
    let foreignPid = 0;
    try {
      await waitFor(async () => ((await sandboxListeningPorts()).has(port) ? true : null));
      expect(await ports.owns(port)).toBe(true);
      expect(await ports.owns(port)).toBe(true);

      own.kill('SIGKILL');
      await exited(own);
      expect(await ports.owns(port)).toBe(false);

      foreignPid = await foreignListener(port);
      await waitFor(() => reachable(port));
      expect(await ports.owns(port)).toBe(false);
      expect((await sandboxListeningPorts()).has(port)).toBe(false);
    } finally {
      own.kill('SIGKILL');
      if (foreignPid) process.kill(foreignPid, 'SIGKILL');
    }
  });

  test('a port taken over between two requests is refused through the proxy', async ({ startAgent }) => {
    const h = await startAgent();
    const port = await freePort();
    const own = spawn(process.execPath, ['-e', LISTEN(port)], { stdio: 'ignore' });
    let foreignPid = 0;
    const via = () =>
      fetch(`${h.url}/x`, { headers: { [HEADER]: h.userContext({ audience: 'app', port }) } });
    try {
      await waitFor(async () => ((await sandboxListeningPorts()).has(port) ? true : null));
      const reached = await via();
      expect(reached.status).toBe(200);
      expect(await reached.text()).toBe('reached');

      own.kill('SIGKILL');
      await exited(own);
      foreignPid = await foreignListener(port);
      await waitFor(() => reachable(port));
      const refused = await via();
      expect(refused.status).toBe(UNREACHABLE_PORT_STATUS);
      expect(await refused.text()).not.toContain('reached');
    } finally {
      own.kill('SIGKILL');
      if (foreignPid) process.kill(foreignPid, 'SIGKILL');
    }
  });

  test('a reserved port the tree holds is refused, a port opened after a refusal is served', async () => {
    const ports = new SandboxPorts({ now: frozen });
    const port = await freePort();
    expect(await ports.owns(port)).toBe(false);
    const own = spawn(process.execPath, ['-e', LISTEN(port)], { stdio: 'ignore' });
    try {
      await waitFor(async () => ((await sandboxListeningPorts()).has(port) ? true : null));
      expect(await ports.owns(port)).toBe(true);
      expect(await ports.owns(port, true)).toBe(false);
      expect(await ports.owns(port)).toBe(true);
    } finally {
      own.kill('SIGKILL');
    }
  });
});
