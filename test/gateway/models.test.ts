// The upstream's model list the server hands new sandboxes (SINGULACOMP_LLM_MODELS): read with the
// server's key, reused within its lifetime, never handed on (nor kept) when it names no model; an
// account without any upstream gets the empty list.
import { type Server, createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterEach, expect, test } from 'vitest';
import { createLogger } from '../../server/logger';
import { createGatewayModels } from '../../resolvers/gateway/models';
import type { LlmConfig } from '../../resolvers/gateway/llm';

interface Upstream {
  baseUrl: string;
  /** Authorization headers of the model-list requests, in order. */
  seen: string[];
  answer: { status: number; ids: string[] };
}

const servers: Server[] = [];
afterEach(async () => {
  for (const server of servers.splice(0)) await new Promise((resolve) => server.close(resolve));
});

async function upstream(ids: string[]): Promise<Upstream> {
  const state: Upstream = { baseUrl: '', seen: [], answer: { status: 200, ids } };
  const server = createServer((req, res) => {
    if (req.url !== '/v1/models') return void res.writeHead(404).end();
    state.seen.push(req.headers.authorization ?? '');
    res.writeHead(state.answer.status, { 'content-type': 'application/json' });
    res.end(JSON.stringify({ data: state.answer.ids.map((id) => ({ id, object: 'model' })) }));
  });
  servers.push(server);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  state.baseUrl = `http://127.0.0.1:${(server.address() as AddressInfo).port}/v1`;
  return state;
}

function config(llm: Partial<LlmConfig>): LlmConfig {
  return { openai: null, anthropic: null, accounts: {}, maxImages: 12, ...llm };
}

test('the list is read with the server’s key once per lifetime and read again after it', async () => {
  const server = await upstream(['m1', 'm2']);
  let now = 1_000_000;
  const models = createGatewayModels({
    llm: config({ openai: { baseUrl: server.baseUrl, apiKey: 'sk-server' } }),
    logger: createLogger('silent'),
    ttlMs: 60_000,
    now: () => now,
  });
  const [first, second] = await Promise.all([models.forAccount('a'), models.forAccount('b')]);
  expect(first).toEqual(['m1', 'm2']);
  expect(second).toEqual(['m1', 'm2']);
  now += 59_000;
  server.answer.ids = ['m3'];
  expect(await models.forAccount('a')).toEqual(['m1', 'm2']);
  expect(server.seen).toEqual(['Bearer sk-server']);
  now += 2_000;
  expect(await models.forAccount('a')).toEqual(['m3']);
  expect(server.seen).toHaveLength(2);
});

test('an account’s own upstream wins; without any upstream the list is empty', async () => {
  const shared = await upstream(['shared']);
  const own = await upstream(['own']);
  const models = createGatewayModels({
    llm: config({
      openai: { baseUrl: shared.baseUrl, apiKey: 'sk-shared' },
      accounts: { special: { openai: { baseUrl: own.baseUrl, apiKey: 'sk-own' } } },
    }),
    logger: createLogger('silent'),
  });
  expect(await models.forAccount('special')).toEqual(['own']);
  expect(await models.forAccount('other')).toEqual(['shared']);
  expect(own.seen).toEqual(['Bearer sk-own']);
  const none = createGatewayModels({ llm: config({}), logger: createLogger('silent') });
  expect(await none.forAccount('a')).toEqual([]);
});

test('a failed or empty answer gives no list and is asked again next time', async () => {
  const server = await upstream([]);
  const models = createGatewayModels({
    llm: config({ openai: { baseUrl: server.baseUrl, apiKey: null } }),
    logger: createLogger('silent'),
  });
  expect(await models.forAccount('a')).toBeNull();
  server.answer = { status: 500, ids: ['m1'] };
  expect(await models.forAccount('a')).toBeNull();
  server.answer = { status: 200, ids: ['m1'] };
  expect(await models.forAccount('a')).toEqual(['m1']);
  expect(server.seen).toEqual(['', '', '']);
  const unreachable = createGatewayModels({
    llm: config({ openai: { baseUrl: 'http://127.0.0.1:1/v1', apiKey: null } }),
    logger: createLogger('silent'),
  });
  expect(await unreachable.forAccount('a')).toBeNull();
});
