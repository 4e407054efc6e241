import { symlinkSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, describe, expect, test } from 'vitest';
import type { SandboxTemplate } from '../../image/manifest';
import { createGitTreeReader, type RepoFileReader } from '../../image/repo-files';
import {
  computeSnapshotKey,
  isDockerignored,
  parseDockerignore,
  type SnapshotKeyInput,
  snapshotKeyForTemplate,
} from '../../image/snapshot';
import type { HardwareSpec } from '../../image/spec';
import { type CommitOptions, createTestRepo, type TestRepoFiles } from '../support/git';
import { createMemoryRepo } from '../support/repo-files';

const spec: HardwareSpec = { cpu: 2, memoryGiB: 4, diskGiB: 20 };
const runtimeVersion = '1.4.2';

const DOCKERFILE = [
  'FROM node:22 AS build',
  'COPY package.json tsconfig.json /app/',
  'COPY src/ /app/src/',
  'COPY --from=build /app/dist /srv',
  'ADD https://example.com/tool.tgz /tmp/',
  '',
].join('\n');

const BASE_FILES: Record<string, string> = {
  Dockerfile: DOCKERFILE,
  'package.json': '{"name":"app"}\n',
  'tsconfig.json': '{}\n',
  'src/index.ts': 'export const a = 1;\n',
  'src/lib/util.ts': 'export const b = 2;\n',
  'src/lib/util.test.ts': 'test\n',
  'README.md': '# app\n',
  'docs/guide.md': 'guide\n',
  '.dockerignore': '# tests never reach the image\nsrc/**/*.test.ts\n',
};

const cleanup: Array<() => void> = [];
afterEach(() => {
  for (const fn of cleanup.splice(0)) fn();
});

/** A repository the key tests commit to and read from at a commit. */
interface Repo {
  commit(files: TestRepoFiles, options?: string | CommitOptions): string;
  reader(commit: string): RepoFileReader;
}

/** In memory: the key is pure hashing over files, so most tests need no git process. */
function repo(): Repo {
  return createMemoryRepo();
}

/** A real git repository read by the production git reader, for the tests that pin that path. */
function gitRepo(): Repo & { dir: string } {
  const created = createTestRepo(null, { upstream: false });
  cleanup.push(() => created.remove());
  return {
    dir: created.dir,
    commit: (files, options) => created.commit(files, options),
    reader(commit) {
      const files = createGitTreeReader(created.dir, commit);
      cleanup.push(() => files.close());
      return files;
    },
  };
}

function reader(r: Repo, commit: string): RepoFileReader {
  return r.reader(commit);
}

/** The key for the repository's Dockerfile at a commit, read the way production reads it. */
async function keyAt(r: Repo, commit: string, overrides: Partial<SnapshotKeyInput> = {}) {
  const files = reader(r, commit);
  const dockerfile = await files.readFile('Dockerfile');
  if (dockerfile === null) throw new Error('no Dockerfile at the commit');
  return computeSnapshotKey({
    dockerfile,
    dockerfilePath: 'Dockerfile',
    spec,
    runtimeVersion,
    files,
    ...overrides,
  });
}

describe('computeSnapshotKey over an in-memory repository', () => {
  test('hashes the Dockerfile’s COPY sources after .dockerignore, and nothing else', async () => {
    const r = repo();
    const result = await keyAt(r, r.commit(BASE_FILES));
    expect(result.key).toMatch(/^[0-9a-f]{64}$/);
    expect(result.wholeContext).toBe(false);
    expect(result.contextFiles).toEqual(['package.json', 'src/index.ts', 'src/lib/util.ts', 'tsconfig.json']);
  });

  test('an unrelated file change keeps the key', async () => {
    const r = repo();
    const before = await keyAt(r, r.commit(BASE_FILES));
    const after = await keyAt(r, r.commit({ 'README.md': '# app, now documented\n', 'docs/new.md': 'x' }));
    expect(after.key).toBe(before.key);
  });

  test('a change to a dockerignored file keeps the key', async () => {
    const r = repo();
    const before = await keyAt(r, r.commit(BASE_FILES));
    const after = await keyAt(r, r.commit({ 'src/lib/util.test.ts': 'changed\n' }));
    expect(after.key).toBe(before.key);
  });

  test('a new file inside a copied directory changes the key', async () => {
    const r = repo();
    const before = await keyAt(r, r.commit(BASE_FILES));
    const after = await keyAt(r, r.commit({ 'src/extra.ts': '' }));
    expect(after.key).not.toBe(before.key);
    expect(after.contextFiles).toContain('src/extra.ts');
  });

  test('one changed byte in the Dockerfile changes the key', async () => {
    const r = repo();
    const before = await keyAt(r, r.commit(BASE_FILES));
    const after = await keyAt(r, r.commit({ Dockerfile: DOCKERFILE.replace('node:22', 'node:23') }));
    expect(after.key).not.toBe(before.key);
  });

  test('the hardware spec and the runtime version are part of the key', async () => {
    const r = repo();
    const commit = r.commit(BASE_FILES);
    const base = (await keyAt(r, commit)).key;
    const keys = [
      (await keyAt(r, commit, { spec: { ...spec, cpu: 4 } })).key,
      (await keyAt(r, commit, { spec: { ...spec, memoryGiB: 8 } })).key,
      (await keyAt(r, commit, { spec: { ...spec, diskGiB: 21 } })).key,
      (await keyAt(r, commit, { runtimeVersion: '1.4.3' })).key,
    ];
    expect(new Set([base, ...keys]).size).toBe(5);
  });

  test('the runtime source is part of the key, and image keys stay what they were without one', async () => {
    const r = repo();
    const commit = r.commit(BASE_FILES);
    const implicit = (await keyAt(r, commit)).key;
    const image = (await keyAt(r, commit, { runtimeSource: 'image' })).key;
    const pkg = await keyAt(r, commit, { runtimeSource: 'package' });
    const pinned = (await keyAt(r, commit, { runtimeSource: 'package', runtimeSha256: 'a'.repeat(64) })).key;
    const repinned = (await keyAt(r, commit, { runtimeSource: 'package', runtimeSha256: 'b'.repeat(64) }))
      .key;
    expect(image).toBe(implicit);
    expect(pkg.key).toMatch(/^[0-9a-f]{64}$/);
    expect(new Set([image, pkg.key, pinned, repinned]).size).toBe(4);
    // The source changes the key only: the same context files take part either way.
    expect(pkg.contextFiles).toEqual((await keyAt(r, commit)).contextFiles);
    expect((await keyAt(r, commit, { runtimeSource: 'package' })).key).toBe(pkg.key);
  });

  test('a layer without its package floor, and another runtime image, are part of the key', async () => {
    const r = repo();
    const commit = r.commit(BASE_FILES);
    const image = (await keyAt(r, commit)).key;
    expect((await keyAt(r, commit, { packageFloor: true, runtimeImage: null })).key).toBe(image);
    const floorless = (await keyAt(r, commit, { packageFloor: false })).key;
    const local = (await keyAt(r, commit, { runtimeImage: 'localhost/singulacomp-runtime' })).key;
    const both = (
      await keyAt(r, commit, { packageFloor: false, runtimeImage: 'localhost/singulacomp-runtime' })
    ).key;
    expect(new Set([image, floorless, local, both]).size).toBe(4);
  });

  test('globs pick matching files at their own level only', async () => {
    const r = repo();
    const commit = r.commit({
      Dockerfile: 'FROM x\nCOPY *.json config/[ab].yaml /app/\n',
      'package.json': '1',
      'tsconfig.json': '2',
      'nested/deep.json': '3',
      'config/a.yaml': 'a',
      'config/b.yaml': 'b',
      'config/c.yaml': 'c',
    });
    expect((await keyAt(r, commit)).contextFiles).toEqual([
      'config/a.yaml',
      'config/b.yaml',
      'package.json',
      'tsconfig.json',
    ]);
  });

  test('COPY . pulls the whole context minus .dockerignore', async () => {
    const r = repo();
    const commit = r.commit({
      Dockerfile: 'FROM x\nCOPY [".", "/app"]\n',
      'a.md': 'a',
      'sub/b.md': 'b',
      'node_modules/x/index.js': 'x',
      '.dockerignore': 'node_modules\n*.md\n!a.md\n',
    });
    expect((await keyAt(r, commit)).contextFiles).toEqual([
      '.dockerignore',
      'Dockerfile',
      'a.md',
      'sub/b.md',
    ]);
  });

  test('a source with a variable falls back to the whole context', async () => {
    const r = repo();
    const first = await keyAt(
      r,
      r.commit({ Dockerfile: 'FROM x\nARG DIR=src\nCOPY $DIR /app\n', 'src/a': 'a', 'README.md': '1' }),
    );
    expect(first.wholeContext).toBe(true);
    const second = await keyAt(r, r.commit({ 'README.md': '2' }));
    expect(second.key).not.toBe(first.key);
  });

  test('a RUN bind mount of the context counts as a source', async () => {
    const r = repo();
    const before = await keyAt(
      r,
      r.commit({
        Dockerfile:
          'FROM x\nRUN --mount=type=bind,source=scripts,target=/s /s/setup.sh\nRUN --mount=type=cache,target=/c true\n',
        'scripts/setup.sh': 'echo 1',
        'other.txt': 'o',
      }),
    );
    expect(before.contextFiles).toEqual(['scripts/setup.sh']);
    const after = await keyAt(r, r.commit({ 'scripts/setup.sh': 'echo 2' }));
    expect(after.key).not.toBe(before.key);
  });

  test('a Dockerfile-specific ignore file takes precedence over .dockerignore', async () => {
    const r = repo();
    const commit = r.commit({
      'docker/Dockerfile': 'FROM x\nCOPY . /app\n',
      'docker/Dockerfile.dockerignore': 'secret.txt\n',
      '.dockerignore': 'app.txt\n',
      'app.txt': 'a',
      'secret.txt': 's',
    });
    const files = reader(r, commit);
    const result = await computeSnapshotKey({
      dockerfile: (await files.readFile('docker/Dockerfile'))!,
      dockerfilePath: 'docker/Dockerfile',
      spec,
      runtimeVersion,
      files,
    });
    expect(result.contextFiles).toEqual([
      '.dockerignore',
      'app.txt',
      'docker/Dockerfile',
      'docker/Dockerfile.dockerignore',
    ]);
  });

  test('a context directory scopes sources and paths', async () => {
    const r = repo();
    const commit = r.commit({
      'services/api/Dockerfile': 'FROM x\nCOPY . /app\n',
      'services/api/main.go': 'package main',
      'services/web/index.html': '<p>',
    });
    const files = reader(r, commit);
    const result = await computeSnapshotKey({
      dockerfile: (await files.readFile('services/api/Dockerfile'))!,
      dockerfilePath: 'services/api/Dockerfile',
      contextDir: 'services/api',
      spec,
      runtimeVersion,
      files,
    });
    expect(result.contextFiles).toEqual(['Dockerfile', 'main.go']);
  });

  test('length prefixes keep path, mode and content boundaries from colliding', async () => {
    // Unframed, both would hash "a" + "100644" + "b100644c" = "a100644b" + "100644" + "c".
    const one = repo();
    const two = repo();
    const dockerfile = 'FROM x\nCOPY . /app\n';
    const a = await keyAt(one, one.commit({ Dockerfile: dockerfile, a: 'b100644c' }));
    const b = await keyAt(two, two.commit({ Dockerfile: dockerfile, a100644b: 'c' }));
    expect(a.key).not.toBe(b.key);
  });
});

// A few keys computed through the production git reader: the hashing above is pure, these pin
// that real trees (modes, symlinks, a fresh cat-file process) feed it the same way.
describe('computeSnapshotKey over a real git repository', () => {
  test('the same inputs give the same key from a fresh reader', async () => {
    const r = gitRepo();
    const commit = r.commit(BASE_FILES);
    expect((await keyAt(r, commit)).key).toBe((await keyAt(r, commit)).key);
  });

  test('one changed byte in a copied file changes the key', async () => {
    const r = gitRepo();
    const before = await keyAt(r, r.commit(BASE_FILES));
    const after = await keyAt(r, r.commit({ 'src/lib/util.ts': 'export const b = 3;\n' }));
    expect(after.key).not.toBe(before.key);
  });

  test('making a copied file executable changes the key', async () => {
    const r = gitRepo();
    const before = await keyAt(r, r.commit(BASE_FILES));
    const after = await keyAt(r, r.commit({}, { executable: ['package.json'] }));
    expect(after.key).not.toBe(before.key);
  });

  test('a symlinked source hashes the whole context so the link target’s files count', async () => {
    const r = gitRepo();
    r.commit({ Dockerfile: 'FROM x\nCOPY assets /app/assets\n', 'real-assets/logo.svg': '<svg/>' });
    symlinkSync('real-assets', join(r.dir, 'assets'));
    const before = await keyAt(r, r.commit({}));
    expect(before.wholeContext).toBe(true);
    expect(before.contextFiles).toEqual(['Dockerfile', 'assets', 'real-assets/logo.svg']);
    const after = await keyAt(r, r.commit({ 'real-assets/logo.svg': '<svg></svg>' }));
    expect(after.key).not.toBe(before.key);
  });
});

describe('snapshotKeyForTemplate', () => {
  const template = (source: SandboxTemplate['source']): SandboxTemplate => ({
    slug: 't',
    name: 'T',
    source,
    spec,
  });

  test('an image template hashes a FROM line and differs per image', async () => {
    const r = repo();
    const files = reader(r, r.commit({ 'README.md': 'x' }));
    const node22 = await snapshotKeyForTemplate(
      template({ kind: 'image', reference: 'node:22' }),
      files,
      runtimeVersion,
    );
    const node20 = await snapshotKeyForTemplate(
      template({ kind: 'image', reference: 'node:20' }),
      files,
      runtimeVersion,
    );
    expect(node22.ok && node22.dockerfile).toBe('FROM node:22\n');
    expect(node22.ok && node22.contextFiles).toEqual([]);
    expect(node22.ok && node20.ok && node22.key !== node20.key).toBe(true);
  });

  test('a Dockerfile template matches computeSnapshotKey on the same file', async () => {
    const r = gitRepo();
    const commit = r.commit(BASE_FILES);
    const viaTemplate = await snapshotKeyForTemplate(
      template({ kind: 'dockerfile', path: 'Dockerfile' }),
      reader(r, commit),
      runtimeVersion,
    );
    expect(viaTemplate.ok && viaTemplate.key).toBe((await keyAt(r, commit)).key);
  });

  test('a Dockerfile template whose file is missing is an error with a fix', async () => {
    const r = repo();
    const files = reader(r, r.commit({ 'README.md': 'x' }));
    expect(
      await snapshotKeyForTemplate(
        template({ kind: 'dockerfile', path: 'docker/Dockerfile' }),
        files,
        runtimeVersion,
      ),
    ).toEqual({
      ok: false,
      error: 'docker/Dockerfile (template t) is not a file in the repository; commit it or fix the path',
    });
  });
});

describe('.dockerignore matching', () => {
  test.each([
    ['*.md', 'README.md', true],
    ['*.md', 'docs/guide.md', false],
    ['**/*.md', 'docs/guide.md', true],
    ['**/*.md', 'README.md', true],
    ['docs', 'docs/a/b.txt', true],
    ['/docs/', 'docs/a.txt', true],
    ['build/**', 'build/x/y', true],
    ['?.txt', 'a.txt', true],
    ['?.txt', 'ab.txt', false],
    ['[a-c].txt', 'b.txt', true],
    ['[^a-c].txt', 'b.txt', false],
    ['a.b', 'axb', false],
  ])('the pattern %j ignores %j: %s', (pattern, path, expected) => {
    expect(isDockerignored(parseDockerignore(pattern), path)).toBe(expected);
  });

  test('a later exception re-includes, and the last matching line wins', () => {
    const patterns = parseDockerignore('*.md\n!README.md\n\n# comment\n');
    expect(isDockerignored(patterns, 'README.md')).toBe(false);
    expect(isDockerignored(patterns, 'CHANGES.md')).toBe(true);
    expect(isDockerignored(parseDockerignore('!README.md\n*.md\n'), 'README.md')).toBe(true);
  });
});
