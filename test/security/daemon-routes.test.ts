// Issue 42, items 2 and 3, at the daemon itself: it answered /singulacomp/* before it looked at the
// target port, so any signed request (the control plane signs one for every preview and share
// request) reached the control routes; and it proxied to OpenCode's port like any other. Now the
// user context's audience decides: an `app` header (all a preview or share link ever carries)
// reaches only its own port, whatever the path, and OpenCode's and the daemon's ports answer as
// an unused one; a `control` header reaches only /singulacomp/*.
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { describe } from 'vitest';
import { freePort } from '../../contract/ports';
import { expect, test } from '../agent/helpers';

const HEADER = 'x-singulacomp-user-context';

describe('the daemon’s routes answer only control calls', () => {
  test('an app header reaching /singulacomp/messages and /singulacomp/message lands in the app, never the conversation', async ({
    agent: h,
  }) => {
    const seen: string[] = [];
    const app = createServer((req, res) => {
      seen.push(`${req.method} ${req.url}`);
      res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ from: 'app' }));
    });
    await new Promise<void>((resolve) => app.listen(0, '127.0.0.1', resolve));
    const appPort = (app.address() as AddressInfo).port;
    h.agent.options.proxyExtraPorts.push(appPort);
    try {
      const asApp = {
        [HEADER]: h.userContext({ audience: 'app', port: appPort }),
        'x-singulacomp-target-port': String(appPort),
      };
      const read = await fetch(`${h.url}/singulacomp/messages`, { headers: asApp });
      expect(await read.json()).toEqual({ from: 'app' });
      const turn = await fetch(`${h.url}/singulacomp/message`, {
        method: 'POST',
        headers: { ...asApp, 'content-type': 'application/json' },
        body: JSON.stringify({ text: 'hello' }),
      });
      expect(await turn.json()).toEqual({ from: 'app' });
      expect(seen).toEqual(['GET /singulacomp/messages', 'POST /singulacomp/message']);
      expect(h.stub.requests).toHaveLength(0);
      // The same routes with a control header are the daemon's.
      const control = await fetch(`${h.url}/singulacomp/messages`, {
        headers: { [HEADER]: h.userContext() },
      });
      expect(control.status).toBe(200);
      expect(await control.json()).toHaveProperty('messages');
    } finally {
      app.closeAllConnections();
      await new Promise<void>((resolve) => app.close(() => resolve()));
    }
  });

  test('OpenCode’s port and the daemon’s port answer an app header exactly as an unused port does', async ({
    agent: h,
  }) => {
    const opencodePort = h.agent.supervisor.current!.port;
    const unused = await freePort();
    const answer = async (port: number) => {
      const res = await fetch(`${h.url}/config/providers`, {
        headers: {
          [HEADER]: h.userContext({ audience: 'app', port }),
          'x-singulacomp-target-port': String(port),
        },
      });
      return { status: res.status, type: res.headers.get('content-type'), body: await res.text() };
    };
    const free = await answer(unused);
    expect(free.status).toBe(502);
    expect(await answer(opencodePort)).toEqual(free);
    expect(await answer(h.agent.servicePort)).toEqual(free);
    // Even when listed as an extra port, OpenCode's stays out of reach.
    h.agent.options.proxyExtraPorts.push(opencodePort);
    expect(await answer(opencodePort)).toEqual(free);
  });
});
