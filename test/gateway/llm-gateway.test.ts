// The LLM gateway against stand-ins for the model providers (outside our system): a real server,
// real PostgreSQL, a real sandbox token. The upstream must see the server's key, never the sandbox
// token; images beyond the newest 12 become placeholders; usage lands on the session.
import { readFile } from 'node:fs/promises';
import { type IncomingMessage, request as httpRequest } from 'node:http';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { IMAGE_PLACEHOLDER, mapUpstreamStatus, trimImages } from '../../resolvers/gateway/llm';
import { type StubAnthropic, startStubAnthropic } from '../fixtures/stub-anthropic';
import { type StubModel, startStubModel } from '../fixtures/stub-model';
import { SessionLlmUsageDocument } from '../generated/graphql';
import { type LiveSession, createProject, startSession } from '../leases/helpers';
import { type TestApp, startTestApp } from '../support/app';
import { createTestRepo } from '../support/git';
import { waitFor } from '../support/wait';

const SERVER_OPENAI_KEY = 'sk-server-held-openai';
const SERVER_ANTHROPIC_KEY = 'sk-ant-server-held';

function image(n: number) {
  return { type: 'image_url', image_url: { url: `data:image/png;base64,IMG${n}` } };
}

describe('trimming images', () => {
  test('keeps the newest 12 images across messages and replaces the older ones with a placeholder', () => {
    const body = {
      messages: [
        { role: 'user', content: [{ type: 'text', text: 'look' }, image(1), image(2)] },
        { role: 'assistant', content: 'ok' },
        { role: 'user', content: [image(3), image(4), image(5), image(6), image(7), image(8)] },
        { role: 'user', content: [image(9), image(10), image(11), image(12), image(13), image(14)] },
      ],
    };
    expect(trimImages(body, 'openai', 12)).toBe(2);
    const flat = body.messages.flatMap((m) => (Array.isArray(m.content) ? m.content : []));
    const urls = flat
      .filter((p) => p.type === 'image_url')
      .map((p) => (p as ReturnType<typeof image>).image_url.url);
    expect(urls).toEqual(Array.from({ length: 12 }, (_, i) => `data:image/png;base64,IMG${i + 3}`));
    expect(body.messages[0]!.content).toEqual([
      { type: 'text', text: 'look' },
      { type: 'text', text: IMAGE_PLACEHOLDER },
      { type: 'text', text: IMAGE_PLACEHOLDER },
    ]);
  });

  test('counts Anthropic images nested in tool results', () => {
    const img = (n: number) => ({
      type: 'image',
      source: { type: 'base64', media_type: 'image/png', data: `A${n}` },
    });
    const body = {
      messages: [
        { role: 'user', content: [{ type: 'tool_result', tool_use_id: 't1', content: [img(1), img(2)] }] },
        { role: 'user', content: [img(3)] },
      ],
    };
    expect(trimImages(body, 'anthropic', 2)).toBe(1);
    expect(body.messages[0]!.content[0]).toMatchObject({ content: [{ type: 'text' }, { type: 'image' }] });
  });
});

describe('mapping upstream failures', () => {
  test.each([
    [401, 502, 'upstream_credential_rejected'],
    [403, 502, 'upstream_credential_rejected'],
    [429, 429, 'rate_limited'],
    [500, 502, 'upstream_error'],
    [503, 502, 'upstream_error'],
    [400, 400, 'invalid_request'],
    [404, 404, 'invalid_request'],
  ])('upstream HTTP %i reaches the caller as %i %s', (upstream, status, type) => {
    expect(mapUpstreamStatus(upstream, 'openai')).toMatchObject({ status, type });
  });
  test('a 2xx is not an error', () => expect(mapUpstreamStatus(200, 'anthropic')).toBeNull());
});

describe('the LLM gateway over HTTP', () => {
  let t: TestApp;
  let openai: StubModel;
  let anthropic: StubAnthropic;
  let s: LiveSession;
  let base: string;

  beforeAll(async () => {
    openai = await startStubModel({ reply: 'one two three four' });
    anthropic = await startStubAnthropic('alpha beta gamma');
    t = await startTestApp({
      env: {
        SINGULACOMP_LLM_OPENAI_BASE_URL: openai.baseURL,
        SINGULACOMP_LLM_OPENAI_API_KEY: SERVER_OPENAI_KEY,
        SINGULACOMP_LLM_ANTHROPIC_BASE_URL: anthropic.baseURL,
        SINGULACOMP_LLM_ANTHROPIC_API_KEY: SERVER_ANTHROPIC_KEY,
      },
    });
    const repo = createTestRepo({ 'README.md': '# gateway\n' });
    s = await startSession(t, await createProject(t, repo.url));
    base = `${t.url}/v1/llm`;
  });
  afterAll(async () => {
    await t?.stop();
    await openai?.close();
    await anthropic?.close();
  });

  const chat = (body: unknown, token: string | null = s.token) =>
    fetch(`${base}/openai/v1/chat/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', ...(token ? { authorization: `Bearer ${token}` } : {}) },
      body: JSON.stringify(body),
    });

  async function usage() {
    const res = await t.request(SessionLlmUsageDocument, { id: s.sessionId });
    return res.data?.session?.llmUsage;
  }

  test('a sandbox is provisioned with the upstream’s models, so its daemon need not ask for them', async () => {
    const sandbox = await t.app.services.db.sandbox.findUniqueOrThrow({ where: { sessionId: s.sessionId } });
    const config = JSON.parse(
      await readFile(join(t.dataDir, 'sandboxes', sandbox.providerSandboxId!, 'sandbox.json'), 'utf8'),
    ) as { env: Record<string, string> };
    expect(config.env.SINGULACOMP_LLM_MODELS).toBe('["stub-model"]');
  });

  test('a plain completion goes upstream with the server’s key and records its usage', async () => {
    const before = openai.requests.length;
    const res = await chat({ model: 'stub-model', messages: [{ role: 'user', content: 'hi' }] });
    expect(res.status).toBe(200);
    const body = (await res.json()) as { choices: Array<{ message: { content: string } }> };
    expect(body.choices[0]!.message.content).toBe('one two three four');
    const seen = openai.requests[before]!;
    expect(seen.headers.authorization).toBe(`Bearer ${SERVER_OPENAI_KEY}`);
    expect(JSON.stringify(seen.headers)).not.toContain(s.token);
    expect(await usage()).toEqual({ requests: 1, inputTokens: 10, outputTokens: 5 });
  });

  test('a streamed completion arrives chunk by chunk, in order, and its usage is recorded', async () => {
    const res = await chat({
      model: 'stub-model',
      stream: true,
      messages: [{ role: 'user', content: 'hi' }],
    });
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toContain('text/event-stream');
    const text = await res.text();
    const deltas = text
      .split('\n\n')
      .filter((f) => f.startsWith('data: {'))
      .map((f) => JSON.parse(f.slice(6)) as { choices: Array<{ delta?: { content?: string } }> })
      .map((c) => c.choices[0]?.delta?.content ?? '')
      .join('');
    expect(deltas).toBe('one two three four');
    expect(text.trim().endsWith('data: [DONE]')).toBe(true);
    // The gateway asks for usage on every stream, so the stream always reports it.
    expect(openai.requests.at(-1)!.body.stream_options).toEqual({ include_usage: true });
    expect(await usage()).toEqual({ requests: 2, inputTokens: 20, outputTokens: 10 });
  });

  test('with 14 images in the history the upstream receives the newest 12', async () => {
    const messages = [
      {
        role: 'user',
        content: [{ type: 'text', text: 'screens' }, ...Array.from({ length: 7 }, (_, i) => image(i + 1))],
      },
      { role: 'assistant', content: 'seen' },
      { role: 'user', content: Array.from({ length: 7 }, (_, i) => image(i + 8)) },
    ];
    const res = await chat({ model: 'stub-model', messages });
    expect(res.status).toBe(200);
    // Read to its end: the gateway records the call's usage before it ends the response, and the
    // next test counts from there.
    await res.text();
    const sent = JSON.stringify(openai.requests.at(-1)!.messages);
    const kept = [...sent.matchAll(/IMG(\d+)/g)].map((m) => Number(m[1]));
    expect(kept).toEqual([3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14]);
    expect(sent.split(IMAGE_PLACEHOLDER).length - 1).toBe(2);
  });

  test('the Anthropic dialect streams through with x-api-key replaced and usage from message_start/delta', async () => {
    const before = await usage();
    const res = await fetch(`${base}/anthropic/v1/messages`, {
      method: 'POST',
      headers: {
        'content-type': 'application/json',
        'x-api-key': s.token,
        'anthropic-version': '2023-06-01',
      },
      body: JSON.stringify({
        model: 'claude-stub',
        stream: true,
        max_tokens: 10,
        messages: [{ role: 'user', content: 'hi' }],
      }),
    });
    expect(res.status).toBe(200);
    const text = await res.text();
    expect(text).toContain('"text":"gamma"');
    const seen = anthropic.requests.at(-1)!;
    expect(seen.headers['x-api-key']).toBe(SERVER_ANTHROPIC_KEY);
    expect(seen.headers['anthropic-version']).toBe('2023-06-01');
    expect(await usage()).toEqual({
      requests: before!.requests + 1,
      inputTokens: before!.inputTokens + 21,
      outputTokens: before!.outputTokens + 8,
    });
  });

  test.each([
    [401, 502, 'upstream_credential_rejected', null],
    [429, 429, 'rate_limited', '7'],
    [500, 502, 'upstream_error', null],
    [400, 400, 'invalid_request', null],
  ])(
    'an upstream %i reaches the caller as %i %s in its own dialect',
    async (upstream, status, type, retryAfter) => {
      const res = await fetch(`${base}/anthropic/v1/messages`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', 'x-api-key': s.token },
        body: JSON.stringify({ model: `fail-${upstream}`, max_tokens: 10, messages: [] }),
      });
      expect(res.status).toBe(status);
      expect(res.headers.get('retry-after')).toBe(retryAfter);
      const body = (await res.json()) as { type: string; error: { type: string; message: string } };
      expect(body.type).toBe('error');
      expect(body.error.type).toBe(type);
      // The server's credential problem is not shown to the sandbox; the caller's own mistake is.
      expect(body.error.message.includes('stub answered')).toBe(upstream === 400);
    },
  );

  test('concurrent completions of a session each end after their usage is stored, and all of it is', async () => {
    const before = (await usage())!;
    const seenAtEnd = await Promise.all(
      Array.from({ length: 8 }, async (_, i) => {
        const res = await chat({
          model: 'stub-model',
          stream: i % 2 === 0,
          messages: [{ role: 'user', content: 'hi' }],
        });
        expect(res.status).toBe(200);
        await res.text();
        return (await usage())!;
      }),
    );
    // Whichever ended first, its own request is counted by the time its response ended.
    for (const seen of seenAtEnd) expect(seen.requests).toBeGreaterThanOrEqual(before.requests + 1);
    expect(await usage()).toEqual({
      requests: before.requests + 8,
      inputTokens: before.inputTokens + 80,
      outputTokens: before.outputTokens + 40,
    });
  });

  test('a caller that goes away mid-stream cancels the upstream call', async () => {
    openai.setDelayMs(60_000);
    try {
      const res = await chat({
        model: 'stub-model',
        stream: true,
        messages: [{ role: 'user', content: 'slow' }],
      });
      await waitFor(async () => openai.openResponses() === 1);
      await res.body?.cancel();
      await waitFor(async () => openai.openResponses() === 0, 10_000);
    } finally {
      openai.setDelayMs(0);
    }
  });

  test('a caller that reads late gets a large answer whole and in order', async () => {
    // 16 MB: the gateway's writes to the caller fill up long before the end, so its relay pauses
    // the upstream and resumes it as the caller drains (the path a slow client takes).
    const big = Array.from({ length: 16 * 1024 }, (_, i) => `${String(i).padStart(1023, '.')}|`).join('');
    openai.setReply(big);
    try {
      const res = await new Promise<IncomingMessage>((resolve, reject) => {
        const req = httpRequest(
          `${base}/openai/v1/chat/completions`,
          {
            method: 'POST',
            headers: { 'content-type': 'application/json', authorization: `Bearer ${s.token}` },
          },
          resolve,
        );
        req.on('error', reject);
        req.end(JSON.stringify({ model: 'stub-model', messages: [{ role: 'user', content: 'big' }] }));
      });
      expect(res.statusCode).toBe(200);
      res.pause();
      await waitFor(async () => res.readableLength > 0);
      const chunks: Buffer[] = [];
      for await (const chunk of res) chunks.push(chunk as Buffer);
      const body = JSON.parse(Buffer.concat(chunks).toString('utf8')) as {
        choices: Array<{ message: { content: string } }>;
      };
      expect(body.choices[0]!.message.content).toBe(big);
      await waitFor(async () => openai.openResponses() === 0);
    } finally {
      openai.setReply('one two three four');
    }
  });

  test('no token, a PAT or a malformed body are refused before reaching the upstream', async () => {
    const before = openai.requests.length;
    const none = await chat({ model: 'stub-model', messages: [] }, null);
    expect(none.status).toBe(401);
    const pat = await chat({ model: 'stub-model', messages: [] }, t.adminToken);
    expect(pat.status).toBe(403);
    expect(((await pat.json()) as { error: { type: string } }).error.type).toBe('permission_error');
    const bad = await fetch(`${base}/openai/v1/chat/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: `Bearer ${s.token}` },
      body: '{not json',
    });
    expect(bad.status).toBe(400);
    const unknown = await fetch(`${base}/openai/v1/embeddings`, {
      method: 'POST',
      headers: { authorization: `Bearer ${s.token}` },
    });
    expect(unknown.status).toBe(404);
    expect(openai.requests.length).toBe(before);
  });

  test('models are listed from the upstream', async () => {
    const res = await fetch(`${base}/openai/v1/models`, { headers: { authorization: `Bearer ${s.token}` } });
    expect(res.status).toBe(200);
    expect(((await res.json()) as { data: Array<{ id: string }> }).data.map((m) => m.id)).toEqual([
      'stub-model',
    ]);
  });

  test('an unreachable upstream is a 502 that says so', async () => {
    await anthropic.close();
    const res = await fetch(`${base}/anthropic/v1/messages`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'x-api-key': s.token },
      body: JSON.stringify({ model: 'claude-stub', max_tokens: 10, messages: [] }),
    });
    expect(res.status).toBe(502);
    expect(((await res.json()) as { error: { type: string } }).error.type).toBe('upstream_unreachable');
  });

  test('a revoked sandbox token is refused', async () => {
    await t.app.services.tokens.revokeSessionTokens(s.sessionId);
    const res = await chat({ model: 'stub-model', messages: [{ role: 'user', content: 'hi' }] });
    expect(res.status).toBe(401);
    expect(((await res.json()) as { error: { message: string } }).error.message).toContain('revoked');
  });
});
