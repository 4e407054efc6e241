// Merging into an ordinary local repository, the default in development: `main` is checked out in a
// non-bare repository made by `git init`. A merge updates the branch and, when the work tree is
// clean, the work tree (git's receive.denyCurrentBranch=updateInstead); a dirty work tree refuses
// the merge with a message saying what to do, and the refusal is logged with its request id.
import { execFileSync } from 'node:child_process';
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { Writable } from 'node:stream';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { createLogger } from '../../server/logger';
import {
  CreateProjectDocument,
  CreateSessionDocument,
  MergeChangeRequestDocument,
  OpenChangeRequestDocument,
  StopSessionDocument,
} from '../generated/graphql';
import { type TestApp, startTestApp } from '../support/app';
import { GIT_ENV, type TestRepo, createTestRepo, git } from '../support/git';

describe('merging into a non-bare local repository with the default branch checked out', () => {
  let t: TestApp;
  let repo: TestRepo;
  let projectId: string;
  const sessions: string[] = [];
  const lines: Array<Record<string, unknown>> = [];

  beforeAll(async () => {
    const destination = new Writable({
      write(chunk, _encoding, done) {
        for (const line of String(chunk).split('\n')) if (line) lines.push(JSON.parse(line));
        done();
      },
    });
    t = await startTestApp({ logger: createLogger('info', { format: 'json', destination }) });
    // A freshly `git init`-ed repository: no upstream, `main` checked out.
    repo = createTestRepo({ 'README.md': '# local\n' }, { upstream: false });
    const res = await t.request(CreateProjectDocument, {
      input: { name: 'local', repositoryUrl: repo.workdir },
    });
    if (res.data?.createProject.__typename !== 'CreateProjectSuccess') throw new Error(JSON.stringify(res));
    projectId = res.data.createProject.project.id;
  });
  afterAll(async () => {
    for (const sessionId of sessions) await t?.request(StopSessionDocument, { input: { sessionId } });
    await t?.stop();
    repo?.remove();
  });

  /** A session whose branch has one commit adding `file`, and an open change request for it. */
  async function changeRequestAdding(file: string): Promise<string> {
    const created = await t.request(CreateSessionDocument, { input: { projectId } });
    if (created.data?.createSession.__typename !== 'CreateSessionSuccess')
      throw new Error(JSON.stringify(created));
    const session = created.data.createSession.session;
    sessions.push(session.id);
    // As the agent would: a commit on the session branch (never checked out in the repository).
    const commit = commitOnBranch(session.branchName, file, `${file} from the session\n`);
    expect(git(repo.workdir, 'rev-parse', `refs/heads/${session.branchName}`)).toBe(commit);
    const opened = await t.request(OpenChangeRequestDocument, {
      input: { sessionId: session.id, title: `Add ${file}` },
    });
    if (opened.data?.openChangeRequest.__typename !== 'OpenChangeRequestSuccess')
      throw new Error(JSON.stringify(opened));
    return opened.data.openChangeRequest.changeRequest.id;
  }

  test('a merge lands: main and its work tree have the session commit', async () => {
    const before = git(repo.workdir, 'rev-parse', 'main');
    const id = await changeRequestAdding('feature.txt');
    const res = await t.request(MergeChangeRequestDocument, {
      input: { changeRequestId: id, method: 'MERGE' },
    });
    if (res.data?.mergeChangeRequest.__typename !== 'MergeChangeRequestSuccess')
      throw new Error(JSON.stringify(res));
    const merged = res.data.mergeChangeRequest.changeRequest.mergeCommit;
    expect(merged).not.toBe(before);
    expect(git(repo.workdir, 'rev-parse', 'main')).toBe(merged);
    expect(git(repo.workdir, 'symbolic-ref', 'HEAD')).toBe('refs/heads/main');
    expect(readFileSync(join(repo.workdir, 'feature.txt'), 'utf8')).toBe('feature.txt from the session\n');
    expect(git(repo.workdir, 'status', '--porcelain')).toBe('');
  });

  test('with uncommitted changes in the work tree the merge is refused, says why and is logged', async () => {
    const id = await changeRequestAdding('second.txt');
    const before = git(repo.workdir, 'rev-parse', 'main');
    const readme = join(repo.workdir, 'README.md');
    writeFileSync(readme, '# local, edited by hand\n');
    const res = await t.request(MergeChangeRequestDocument, {
      input: { changeRequestId: id, method: 'SQUASH' },
    });
    const payload = res.data?.mergeChangeRequest;
    if (payload?.__typename !== 'ConflictError') throw new Error(JSON.stringify(res));
    expect(payload.code).toBe('CONFLICT');
    const message = payload.message;
    expect(message).toMatch(/uncommitted changes/);
    expect(message).toMatch(/commit or stash/);
    expect(message).not.toMatch(/moved while merging/);
    expect(git(repo.workdir, 'rev-parse', 'main')).toBe(before);
    expect(readFileSync(readme, 'utf8')).toBe('# local, edited by hand\n');

    const requestId = res.headers.get('x-request-id');
    expect(requestId).toBeTruthy();
    const logged = lines.find(
      (line) => line.msg === 'change request merge failed' && line.requestId === requestId,
    );
    expect(logged).toMatchObject({ level: 30, changeRequestId: id, code: 'CONFLICT', method: 'SQUASH' });
    expect(String(logged?.reason)).toMatch(/uncommitted changes/);
  });

  /** Commits `file` on `branch` without checking it out (the work tree keeps `main`). */
  function commitOnBranch(branch: string, file: string, content: string): string {
    const script = `blob=$(printf '%s' "$3" | git hash-object -w --stdin)
git read-tree "refs/heads/$1"
git update-index --add --cacheinfo 100644,"$blob","$2"
commit=$(git commit-tree "$(git write-tree)" -p "refs/heads/$1" -m "add $2")
git update-ref "refs/heads/$1" "$commit"
echo "$commit"`;
    return execFileSync('sh', ['-ec', script, 'sh', branch, file, content], {
      cwd: repo.workdir,
      env: { ...GIT_ENV, GIT_INDEX_FILE: join(repo.workdir, '.git', 'scratch-index') },
      encoding: 'utf8',
    }).trim();
  }
});
