// Starts a real server in-process (HTTP + WebSocket on a free port) against real PostgreSQL (an
// isolated database) or PGlite, with typed GraphQL helpers and seed factories.
import { cpSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { TypedDocumentNode } from '@graphql-typed-document-node/core';
import { type GraphQLFormattedError, print } from 'graphql';
import type { AccountTier } from '../../prisma/generated/client/enums';
import { SCOPES, type UserPrincipal } from '../../resolvers/auth/principal';
import type { SandboxProvider } from '../../resolvers/providers/types';
import { type App, buildApp } from '../../server/app';
import { parseEnv } from '../../server/env';
import type { Logger } from '../../server/logger';
import type { PubSub } from '../../resolvers/events/channels';
import { type TestDatabase, createTestDatabase } from './database';
import { FAST_PATHS_ENV } from './env';
import { pgliteTemplate } from './pglite-template';
import { killLocalSandboxes } from './spawn-server';

export interface TestAppOptions {
  /** @default 'postgres' (an isolated database) */
  db?: 'postgres' | 'pglite';
  /** Use this database instead of creating one (several servers sharing state). */
  databaseUrl?: string;
  env?: Record<string, string>;
  providers?: SandboxProvider[];
  pubsub?: PubSub;
  dataDir?: string;
  /** The server's clock for time-based rules (see clock.ts). @default Date.now */
  now?: () => number;
  /** The server's root logger (e.g. server/logger.ts createLogger with a destination a test reads). */
  logger?: Logger;
}

export interface GqlResult<T> {
  status: number;
  headers: Headers;
  data: T | null;
  errors: GraphQLFormattedError[] | undefined;
}

export interface TestApp {
  app: App;
  url: string;
  graphqlUrl: string;
  wsUrl: string;
  dataDir: string;
  database: TestDatabase | null;
  /** Personal access token of the bootstrap admin (TEAM account). */
  adminToken: string;
  request<T, V>(doc: TypedDocumentNode<T, V>, variables?: V, token?: string | null): Promise<GqlResult<T>>;
  raw(body: unknown, token?: string | null, headers?: Record<string, string>): Promise<GqlResult<unknown>>;
  seedAccount(options?: { tier?: AccountTier; scopes?: string[]; admin?: boolean }): Promise<SeededAccount>;
  stop(): Promise<void>;
}

export interface SeededAccount {
  accountId: string;
  userId: string;
  token: string;
}

export async function startTestApp(options: TestAppOptions = {}): Promise<TestApp> {
  const database = options.databaseUrl || options.db === 'pglite' ? null : await createTestDatabase();
  const dataDir = options.dataDir ?? mkdtempSync(join(tmpdir(), 'sc-data-'));
  // A fresh data dir starts from a migrated copy: initdb is what makes a PGlite start slow.
  if (options.db === 'pglite' && !options.dataDir) {
    cpSync(await pgliteTemplate(), join(dataDir, 'pglite'), { recursive: true });
  }
  const databaseUrl = options.databaseUrl ?? database?.url;
  const env = parseEnv({
    NODE_ENV: 'test',
    PORT: '0',
    HOST: '127.0.0.1',
    LOG_LEVEL: 'silent',
    SINGULACOMP_DATA_DIR: dataDir,
    SINGULACOMP_LOCAL_ENTRY: 'exec sleep 600',
    SINGULACOMP_SECRET_KEY: Buffer.alloc(32, 7).toString('base64'),
    ...(databaseUrl ? { DATABASE_URL: databaseUrl } : {}),
    ...FAST_PATHS_ENV,
    ...options.env,
  });
  const app = await buildApp({
    env,
    providers: options.providers,
    pubsub: options.pubsub,
    now: options.now,
    ...(options.logger ? { logger: options.logger } : {}),
  });
  try {
    await app.start();
  } catch (error) {
    // Nothing of a failed start may outlive it: its pool, its Redis connections, its timers.
    await app.stop().catch(() => {});
    await database?.drop();
    throw error;
  }
  const adminToken = app.bootstrapToken ?? readFileSync(join(dataDir, 'bootstrap-token'), 'utf8').trim();
  const graphqlUrl = `${app.url}/graphql`;

  async function raw(body: unknown, token?: string | null, headers: Record<string, string> = {}) {
    const response = await fetch(graphqlUrl, {
      method: 'POST',
      headers: {
        'content-type': 'application/json',
        // A fresh connection per request: on a loaded machine a pooled keep-alive connection can be
        // reused just as the server closes it for idleness, and the request fails with ECONNRESET.
        connection: 'close',
        ...(token === null ? {} : { authorization: `Bearer ${token ?? adminToken}` }),
        ...headers,
      },
      body: typeof body === 'string' ? body : JSON.stringify(body),
    });
    const text = await response.text();
    let json: { data?: unknown; errors?: GraphQLFormattedError[] } = {};
    try {
      json = JSON.parse(text);
    } catch {
      json = { errors: [{ message: text }] };
    }
    return {
      status: response.status,
      headers: response.headers,
      data: json.data ?? null,
      errors: json.errors,
    };
  }

  return {
    app,
    url: app.url,
    graphqlUrl,
    wsUrl: graphqlUrl.replace(/^http/, 'ws'),
    dataDir,
    database,
    adminToken,
    raw,
    async request(doc, variables, token) {
      return (await raw({ query: print(doc), variables }, token)) as GqlResult<never>;
    },
    async seedAccount(seed = {}) {
      const db = app.services.db;
      const account = await db.account.create({
        data: { name: `acct-${Date.now()}-${Math.random()}`, tier: seed.tier ?? 'PRO' },
      });
      const user = await db.user.create({
        data: {
          accountId: account.id,
          email: `${account.id}@example.com`,
          name: 'Seeded',
          role: seed.admin === false ? 'MEMBER' : 'ADMIN',
        },
      });
      const principal: UserPrincipal = {
        kind: 'USER',
        userId: user.id,
        accountId: account.id,
        isAdmin: seed.admin !== false,
        scopes: new Set(SCOPES),
        tokenId: '',
        expiresAt: null,
      };
      const { secret } = await app.services.tokens.createPersonalAccessToken(principal, {
        name: 'seeded',
        scopes: seed.scopes ?? [...SCOPES],
      });
      return { accountId: account.id, userId: user.id, token: secret };
    },
    async stop() {
      try {
        await app.stop();
      } finally {
        // LOCAL sandboxes run detached: sessions a test left running must not outlive it, even
        // when the server's own stop failed.
        killLocalSandboxes(dataDir);
        await database?.drop();
        if (!options.dataDir) rmSync(dataDir, { recursive: true, force: true });
      }
    },
  };
}
