// vitest fixtures of the test kit: a real server (`app`), a PostgreSQL client on its database
// (`sql`), a project on a real git repository (`project`) and a session in it (`session`). Each
// cleans up in `finally`; the per-test ones print their ids when the test fails.
//
//   import { test } from '../support/fixtures';
//   test('…', async ({ app, project, session }) => { … });
//
// `app`, `sql` and `project` live for the whole test file (one server per file, as before);
// `session` is created for the test that asks for it and stopped after it.
import pg from 'pg';
import { test as base } from 'vitest';
import { CreateProjectDocument, CreateSessionDocument, StopSessionDocument } from '../generated/graphql';
import { type TestApp, type TestAppOptions, startTestApp } from './app';
import { type TestClock, createTestClock } from './clock';
import { type TestRepo, createTestRepo } from './git';

export interface TestProject {
  /** Global id (what GraphQL inputs take). */
  id: string;
  repo: TestRepo;
}

export interface TestSession {
  /** Global id of the session. */
  id: string;
  sessionId: string;
  branchName: string;
}

/** Creates a project on `repo` through the API; throws with the whole answer when refused. */
export async function createTestProject(
  app: TestApp,
  name: string,
  repo = createTestRepo(),
): Promise<TestProject> {
  const created = await app.request(CreateProjectDocument, { input: { name, repositoryUrl: repo.url } });
  if (created.data?.createProject.__typename !== 'CreateProjectSuccess') {
    throw new Error(`createProject ${name} was refused: ${JSON.stringify(created)}`);
  }
  return { id: created.data.createProject.project.id, repo };
}

/** Creates a session in a project through the API; throws with the whole answer when refused. */
export async function createTestSession(app: TestApp, projectId: string): Promise<TestSession> {
  const res = await app.request(CreateSessionDocument, { input: { projectId } });
  if (res.data?.createSession.__typename !== 'CreateSessionSuccess') {
    throw new Error(`createSession was refused: ${JSON.stringify(res)}`);
  }
  const { id, sessionId, branchName } = res.data.createSession.session;
  return { id, sessionId, branchName };
}

export interface AppWithProject {
  app: TestApp;
  /** A client on the app's PostgreSQL database, for asserting what was stored. */
  sql: pg.Client;
  project: TestProject;
  stop(): Promise<void>;
}

/**
 * The setup most API test files share: a server on its own database, a SQL client on it and one
 * project on a fresh repository. For files that keep `describe` + `beforeAll`; stop() in afterAll.
 */
export async function startAppWithProject(
  name: string,
  options: { app?: TestAppOptions; repo?: TestRepo } = {},
): Promise<AppWithProject> {
  const app = await startTestApp(options.app);
  let sql: pg.Client | null = null;
  try {
    if (!app.database) throw new Error('startAppWithProject needs PostgreSQL (db: "postgres")');
    sql = new pg.Client({ connectionString: app.database.url });
    await sql.connect();
    const project = await createTestProject(app, name, options.repo);
    const client = sql;
    return {
      app,
      sql: client,
      project,
      async stop() {
        await client.end();
        await app.stop();
      },
    };
  } catch (error) {
    await sql?.end().catch(() => {});
    await app.stop();
    throw error;
  }
}

export interface KitFixtures {
  /** The server's clock (file scope): advance it instead of waiting for an expiry. */
  clock: TestClock;
  /** A real server on its own PostgreSQL database (file scope). */
  app: TestApp;
  /** A client on `app`'s database (file scope). */
  sql: pg.Client;
  /** A project on a fresh repository (file scope). */
  project: TestProject;
  /** A session in `project`, stopped after the test. */
  session: TestSession;
}

export const test = base.extend<KitFixtures>({
  clock: [
    // biome-ignore lint/correctness/noEmptyPattern: vitest fixtures take their dependencies by destructuring
    async ({}, use) => {
      await use(createTestClock());
    },
    { scope: 'file' },
  ],
  app: [
    async ({ clock }, use) => {
      const app = await startTestApp({ now: clock.now });
      try {
        await use(app);
      } finally {
        await app.stop();
      }
    },
    { scope: 'file' },
  ],
  sql: [
    async ({ app }, use) => {
      if (!app.database) throw new Error('the sql fixture needs PostgreSQL');
      const client = new pg.Client({ connectionString: app.database.url });
      await client.connect();
      try {
        await use(client);
      } finally {
        await client.end();
      }
    },
    { scope: 'file' },
  ],
  project: [
    async ({ app }, use) => {
      const project = await createTestProject(app, 'fixture');
      try {
        await use(project);
      } finally {
        project.repo.remove();
      }
    },
    { scope: 'file' },
  ],
  session: async ({ app, project, onTestFailed }, use) => {
    const session = await createTestSession(app, project.id);
    onTestFailed(() => {
      console.error(
        `test failed with session ${session.sessionId} (project ${project.id}, data ${app.dataDir})`,
      );
    });
    try {
      await use(session);
    } finally {
      await app.request(StopSessionDocument, { input: { sessionId: session.id } });
    }
  },
});

export { expect } from 'vitest';
