// The gateway paths keep what they looked up (a token's principal, a running sandbox's row, a
// verified preview token, a signed user context) so a request costs no database read; a revocation
// must still refuse the very next request, with no waiting for a cache to expire. Each test warms
// the caches with answered requests first, revokes, then sends exactly one request.
import { createServer } from 'node:http';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { freePort } from '../../contract/ports';
import { RevokeTokenDocument, StopSessionDocument } from '../generated/graphql';
import type { LiveSession } from '../leases/helpers';
import { createPreviewClient } from '../support/preview';
import { E2E_SETUP_TIMEOUT_MS, type E2e, startE2e, appBesideDaemon, startReadySession } from '../e2e/helpers';

const WARM_REQUESTS = 5;

describe('a revoked credential fails at once on the cached gateway paths', () => {
  let e: E2e;
  let s: LiveSession;
  let appPort: number;
  const app = createServer((_req, res) => res.writeHead(200, { 'content-type': 'text/plain' }).end('app'));

  beforeAll(async () => {
    appPort = await freePort();
    e = await startE2e(appBesideDaemon(appPort));
    await new Promise<void>((resolve) => app.listen(appPort, '127.0.0.1', resolve));
    s = await startReadySession(e);
  }, E2E_SETUP_TIMEOUT_MS);
  afterAll(async () => {
    app.closeAllConnections();
    await new Promise((resolve) => app.close(resolve));
    await e?.stop();
  });

  const previewOrigin = () => `http://p${appPort}-${s.sandboxId}.localhost:${new URL(e.t.url).port}/`;

  async function newPat(name: string): Promise<{ id: string; secret: string }> {
    const admin = (await e.t.app.services.tokens.authenticate(`Bearer ${e.t.adminToken}`))!;
    if (admin.kind !== 'USER') throw new Error('the admin token is not a user token');
    const { token, secret } = await e.t.app.services.tokens.createPersonalAccessToken(admin, {
      name,
      scopes: ['sessions:read'],
    });
    return { id: token.id, secret };
  }

  async function llmCall(token: string): Promise<{ status: number; body: string }> {
    const res = await fetch(`${e.t.url}/v1/llm/openai/v1/chat/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: `Bearer ${token}` },
      body: JSON.stringify({ model: 'stub-model', messages: [{ role: 'user', content: 'hi' }] }),
    });
    return { status: res.status, body: await res.text() };
  }

  test('a preview opened with an API token refuses the next request once the token is revoked', async () => {
    const pat = await newPat('preview reader');
    const client = createPreviewClient();
    const headers = { authorization: `Bearer ${pat.secret}` };
    for (let i = 0; i < WARM_REQUESTS; i++) {
      const res = await client.request(previewOrigin(), { headers });
      expect({ status: res.status, body: res.body }).toEqual({ status: 200, body: 'app' });
    }
    const revoked = await e.t.request(RevokeTokenDocument, { input: { tokenId: pat.id } });
    expect(revoked.data?.revokeToken.__typename).toBe('RevokeTokenSuccess');
    const after = await client.request(previewOrigin(), { headers });
    expect(after.status).toBe(401);
    expect(after.body).toContain('revoked');
  });

  test('stopping the session refuses the next LLM call with its sandbox token at once', async () => {
    for (let i = 0; i < WARM_REQUESTS; i++) expect((await llmCall(s.token)).status).toBe(200);
    const tokens = e.t.app.services.tokens;
    // Stopping revokes the sandbox token before anything else stops; the call goes out the moment
    // the revocation is done, while the sandbox and its daemon still run.
    const revoked = new Promise<string>((resolve) => {
      const off = tokens.onRevoked((tokenId) => {
        off();
        resolve(tokenId);
      });
    });
    const stopped = await e.t.request(StopSessionDocument, { input: { sessionId: s.sessionId } });
    expect(stopped.data?.stopSession.__typename).toBe('StopSessionSuccess');
    const tokenId = await revoked;
    const row = await e.t.app.services.db.token.findUniqueOrThrow({ where: { id: tokenId } });
    expect(row.sessionId).toBe(s.sessionId);
    const llm = await llmCall(s.token);
    expect(llm.status).toBe(401);
    expect(llm.body).toContain('revoked');
  });
});
