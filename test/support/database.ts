// An isolated PostgreSQL database per test file, dropped afterwards. Inside a test run it is a
// clone of the run's migrated template (global-setup.ts), so it starts with every migration
// applied; outside one (the bench), or with `empty: true`, it starts empty and the server
// migrates it at start-up.
import { randomBytes } from 'node:crypto';
import pg from 'pg';
import { migrate } from '../../server/migrate';
import { TEST_DATABASE_URL } from './env';
import { TEMPLATE_DATABASE_VARIABLE } from './test-run';

export interface TestDatabase {
  url: string;
  name: string;
  drop(): Promise<void>;
}

export interface TestDatabaseOptions {
  /** Start without any migration applied (tests of the migration runner). @default false */
  empty?: boolean;
}

function withDatabase(url: string, name: string): string {
  const u = new URL(url);
  u.pathname = `/${name}`;
  return u.toString();
}

/** Runs `fn` on a connection of its own to `url` (the server's default database unless given). */
export async function withClient<T>(
  fn: (client: pg.Client) => Promise<T>,
  url = TEST_DATABASE_URL,
): Promise<T> {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    return await fn(client);
  } finally {
    await client.end();
  }
}

/** Drops a database, disconnecting whoever still uses it. */
export async function dropDatabase(name: string): Promise<void> {
  await withClient((client) => client.query(`DROP DATABASE IF EXISTS "${name}" WITH (FORCE)`));
}

/**
 * Creates `name` and applies every migration to it, for cloning. Nobody may stay connected to a
 * template (PostgreSQL refuses to copy a database in use), so this closes its connection.
 */
export async function createTemplateDatabase(name: string): Promise<string> {
  await withClient((client) => client.query(`CREATE DATABASE "${name}"`));
  try {
    await withClient(
      async (client) => {
        await migrate({
          exec: async (sql) => {
            await client.query(sql);
          },
          query: async (sql, params) => (await client.query(sql, params as unknown[])).rows,
          // One connection, nobody else knows the database yet: nothing to lock against.
          withLock: (_key, fn) => fn(),
        });
      },
      withDatabase(TEST_DATABASE_URL, name),
    );
  } catch (error) {
    await dropDatabase(name);
    throw error;
  }
  return name;
}

export async function createTestDatabase(
  prefix = 'sc_test',
  options: TestDatabaseOptions = {},
): Promise<TestDatabase> {
  const name = `${prefix}_${Date.now().toString(36)}_${randomBytes(4).toString('hex')}`;
  const template = options.empty ? undefined : process.env[TEMPLATE_DATABASE_VARIABLE];
  await withClient((client) =>
    client.query(template ? `CREATE DATABASE "${name}" TEMPLATE "${template}"` : `CREATE DATABASE "${name}"`),
  );
  return {
    url: withDatabase(TEST_DATABASE_URL, name),
    name,
    drop: () => dropDatabase(name),
  };
}
