// Attack (6): any user registered a local filesystem path — the server's own data dir included —
// as a repository URL.
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { CreateProjectDocument } from '../generated/graphql';
import { type TestApp, startTestApp } from '../support/app';
import { createTestRepo } from '../support/git';

describe('local repository URLs', () => {
  let allowed: TestApp;
  let disabled: TestApp;
  const repo = createTestRepo({ 'README.md': '# local\n' });

  beforeAll(async () => {
    allowed = await startTestApp();
    disabled = await startTestApp({ env: { SINGULACOMP_ALLOW_LOCAL_REPOSITORIES: 'false' } });
  });
  afterAll(async () => {
    await allowed?.stop();
    await disabled?.stop();
  });

  test('a path inside the data dir is refused even where local repositories are allowed, and no project is stored', async () => {
    for (const url of [
      allowed.dataDir,
      join(allowed.dataDir, 'sandboxes'),
      `file://${allowed.dataDir}/git-cache`,
    ]) {
      const res = await allowed.request(CreateProjectDocument, {
        input: { name: 'steal', repositoryUrl: url },
      });
      expect(res.data?.createProject, url).toMatchObject({
        __typename: 'ValidationError',
        field: ['input', 'repositoryUrl'],
      });
    }
    expect(await allowed.app.services.db.project.count({ where: { name: 'steal' } })).toBe(0);
    const ok = await allowed.request(CreateProjectDocument, {
      input: { name: 'fine', repositoryUrl: repo.url },
    });
    expect(ok.data?.createProject.__typename).toBe('CreateProjectSuccess');
  });

  test('with the setting off, no local path or file:// URL is accepted', async () => {
    for (const url of [repo.url, `file://${repo.url}`]) {
      const res = await disabled.request(CreateProjectDocument, {
        input: { name: 'local', repositoryUrl: url },
      });
      expect(res.data?.createProject, url).toMatchObject({ __typename: 'ValidationError' });
    }
    expect(await disabled.app.services.db.project.count({ where: { name: 'local' } })).toBe(0);
  });
});
