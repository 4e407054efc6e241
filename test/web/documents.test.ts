// Every operation the dashboard sends passes the server's own validation, graphql-armor's cost and
// depth limits included (a page whose query is refused shows only an error): each is sent without
// its variables, so validation runs and execution stops at the missing variables, or runs harmlessly.
import { print } from 'graphql';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import * as web from '../../web/src/generated/graphql';
import { type TestApp, startTestApp } from '../support/app';

const documents = Object.entries(web).filter(
  (entry): entry is [string, import('graphql').DocumentNode] =>
    entry[0].endsWith('Document') &&
    typeof entry[1] === 'object' &&
    entry[1] !== null &&
    'definitions' in entry[1],
);

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
});
