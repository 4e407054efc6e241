// Every operation the dashboard, the CLI and the tests send passes the server's own validation,
// graphql-armor's cost and depth limits included (a page whose query is refused shows only an
// error; a CLI command likewise): each is sent without its variables, so validation runs and
// execution stops at the missing variables, or runs harmlessly. They share fragments
// (contract/documents/fragments.graphql), which the cost limit counts as if spelled inline.
import { type DocumentNode, print } from 'graphql';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import * as cli from '../../contract/generated/cli';
import * as web from '../../web/src/generated/graphql';
import * as tests from '../generated/graphql';
import { type TestApp, startTestApp } from '../support/app';

const documentsOf = (module: Record<string, unknown>) =>
  Object.entries(module).filter(
    (entry): entry is [string, DocumentNode] =>
      entry[0].endsWith('Document') &&
      typeof entry[1] === 'object' &&
      entry[1] !== null &&
      'definitions' in entry[1],
  );
const documents = documentsOf(web);

// What the server answers an operation it refuses to run: armor's limits and schema validation.
const REFUSED =
  /Syntax Error|exceeded|Cannot query field|Unknown (fragment|argument|type)|must have a selection/;

describe('the dashboard’s documents against the server', () => {
  let t: TestApp;
  beforeAll(async () => {
    t = await startTestApp();
  });
  afterAll(async () => t?.stop());

  test('there are documents to check', () => {
    expect(documents.map(([name]) => name)).toEqual(
      expect.arrayContaining(['SessionPageDocument', 'ProjectPageDocument', 'AccountSessionsDocument']),
    );
  });

  test.each(documents)('%s passes validation', async (_name, document) => {
    const res = await t.raw({ query: print(document) });
    const messages = (res.errors ?? []).map((error) => error.message);
    // Queries and mutations fail at their missing variables; subscriptions are refused over HTTP.
    for (const message of messages) {
      expect(message).toMatch(/^Variable "\$\w+" of required type|WebSocket/);
    }
  });

  // The CLI's and the tests' operations: some have no required variables and run (as a user, who
  // may be refused them); none is refused by validation.
  test.each([...documentsOf(cli), ...documentsOf(tests)])('%s passes validation', async (_name, document) => {
    const res = await t.raw({ query: print(document) });
    expect((res.errors ?? []).map((error) => error.message).filter((m) => REFUSED.test(m))).toEqual([]);
  });

  test('a selection spread through fragments costs what it costs inline', async () => {
    // Both over the limit (first: 5000), so the server names their cost.
    const costOf = async (query: string) => {
      const res = await t.raw({ query });
      const found = /Query Cost limit of \d+ exceeded, found ([\d.]+)/.exec(res.errors?.[0]?.message ?? '');
      expect(found, JSON.stringify(res.errors)).not.toBeNull();
      return Number(found?.[1]);
    };
    const fields =
      'id sessionId seq status agentReady runtimeState provisioningPhase agent branchName baseRef ' +
      'baseCommit costUsd createdAt stoppedAt stopReason failureReason';
    const inline = await costOf(`query { sessions(first: 5000) { edges { node { ${fields} } } } }`);
    const spread = await costOf(
      `query { sessions(first: 5000) { edges { node { ...S } } } } fragment S on Session { ${fields} }`,
    );
    // The spread adds its own object and scalar cost (3, times the list), not a depth level: were
    // fragments not flattened, its 16 fields would cost 1.5 times as much and the whole over 1.6 times.
    expect(spread).toBeGreaterThan(inline);
    expect(spread).toBeLessThan(inline * 1.2);
  });
});
