import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, test } from 'vitest';
import { loadManifest } from '../../image/manifest';
import { createGitTreeReader, type GitTreeReader, GitTreeReadError } from '../../image/repo-files';
import { createTestRepo, type TestRepo } from '../support/git';

const cleanup: Array<() => void> = [];
afterEach(() => {
  for (const fn of cleanup.splice(0)) fn();
});

function repo(): TestRepo {
  const created = createTestRepo(null, { upstream: false });
  cleanup.push(() => created.remove());
  return created;
}

function reader(dir: string, commit: string): GitTreeReader {
  const created = createGitTreeReader(dir, commit);
  cleanup.push(() => created.close());
  return created;
}

describe('createGitTreeReader', () => {
  test('lists every file at the commit, sorted, with odd names intact', async () => {
    const r = repo();
    const commit = r.commit({
      'b.txt': 'b',
      'a dir/with space.txt': 'x',
      'ünïcode/ファイル.md': 'u',
      'tab\tname': 't',
      'deep/er/still/file': 'd',
    });
    expect(await reader(r.dir, commit).listFiles()).toEqual([
      'a dir/with space.txt',
      'b.txt',
      'deep/er/still/file',
      'tab\tname',
      'ünïcode/ファイル.md',
    ]);
  });

  test('reads exact bytes, including binary content with NUL and newlines', async () => {
    const r = repo();
    const binary = Buffer.from([0, 1, 2, 10, 13, 255, 0, 10]);
    const commit = r.commit({ 'bin.dat': binary, empty: '', 'text.txt': 'hello\nworld\n' });
    const files = reader(r.dir, commit);
    expect(await files.readFile('bin.dat')).toEqual(binary);
    expect(await files.readFile('empty')).toEqual(Buffer.alloc(0));
    expect((await files.readFile('text.txt'))?.toString()).toBe('hello\nworld\n');
  });

  test('missing paths, directories and escaping paths read as null', async () => {
    const r = repo();
    const commit = r.commit({ 'dir/file.txt': 'x' });
    const files = reader(r.dir, commit);
    expect(await files.readFile('nope.txt')).toBeNull();
    expect(await files.readFile('dir')).toBeNull();
    expect(await files.readFile('../dir/file.txt')).toBeNull();
    expect(await files.readFile('dir/file.txt\nHEAD:dir/file.txt')).toBeNull();
    // Still answering after the misses.
    expect((await files.readFile('./dir//file.txt'))?.toString()).toBe('x');
  });

  test('reads before and after listing give the same bytes', async () => {
    const r = repo();
    const commit = r.commit({ 'a.txt': 'alpha', 'b.txt': 'beta' });
    const files = reader(r.dir, commit);
    const before = await files.readFile('a.txt');
    await files.listFiles();
    expect(await files.readFile('a.txt')).toEqual(before);
    expect(await files.readFile('missing')).toBeNull();
  });

  test('is pinned to its commit: later commits do not leak in', async () => {
    const r = repo();
    const first = r.commit({ 'f.txt': 'one' });
    r.commit({ 'f.txt': 'two', 'g.txt': 'new' });
    const old = reader(r.dir, first);
    expect((await old.readFile('f.txt'))?.toString()).toBe('one');
    expect(await old.readFile('g.txt')).toBeNull();
    expect(await old.listFiles()).toEqual(['f.txt']);
    const head = reader(r.dir, 'HEAD');
    expect((await head.readFile('f.txt'))?.toString()).toBe('two');
    expect(await head.commitId()).toBe(r.git('rev-parse', 'HEAD'));
  });

  test('many concurrent reads come back matched to their paths', async () => {
    const r = repo();
    const files: Record<string, string> = {};
    for (let i = 0; i < 300; i++) files[`f/${i}.txt`] = `content ${i} `.repeat(i % 17);
    const commit = r.commit(files);
    const tree = reader(r.dir, commit);
    const paths = Object.keys(files);
    const contents = await Promise.all(paths.map((path) => tree.readFile(path)));
    expect(contents.map((content) => content?.toString())).toEqual(paths.map((path) => files[path]));
  });

  test('an unknown revision fails with GitTreeReadError', async () => {
    const r = repo();
    r.commit({ 'a.txt': 'a' });
    await expect(reader(r.dir, 'no-such-branch').listFiles()).rejects.toBeInstanceOf(GitTreeReadError);
    await expect(reader(r.dir, '--output=/tmp/x').commitId()).rejects.toThrow('not a revision');
  });

  test('reads through a bare clone as well as a work tree', async () => {
    const r = repo();
    const commit = r.commit({ 'a.txt': 'a' });
    const parent = mkdtempSync(join(tmpdir(), 'singulacomp-bare-'));
    cleanup.push(() => rmSync(parent, { recursive: true, force: true }));
    const bare = join(parent, 'repo.git');
    r.git('clone', '-q', '--bare', r.dir, bare);
    expect((await reader(bare, commit).readFile('a.txt'))?.toString()).toBe('a');
  });
});

describe('loadManifest through a git tree reader', () => {
  test('reads singulacomp.yaml at the commit', async () => {
    const r = repo();
    const commit = r.commit({
      'singulacomp.yaml': 'sandbox:\n  templates:\n    - { slug: web, name: Web, dockerfile: Dockerfile }\n',
    });
    const result = await loadManifest(reader(r.dir, commit));
    expect(result.ok && result.manifest?.templates.map((template) => template.slug)).toEqual(['web']);
  });

  test('singulacomp.yaml wins over singulacomp.toml with a warning', async () => {
    const r = repo();
    const commit = r.commit({
      'singulacomp.yaml': 'sandbox:\n  templates: [{ slug: from-yaml, name: Y, image: "node:22" }]\n',
      'singulacomp.toml': '[[sandbox.templates]]\nslug = "from-toml"\nname = "T"\nimage = "node:22"\n',
    });
    const result = await loadManifest(reader(r.dir, commit));
    expect(result.ok && result.manifest?.templates[0]?.slug).toBe('from-yaml');
    expect(result.warnings).toEqual([
      'singulacomp.toml: ignored because singulacomp.yaml exists; delete one of them',
    ]);
  });

  test('the legacy TOML manifest is read when it is the only one', async () => {
    const r = repo();
    const commit = r.commit({
      'singulacomp.toml': '[[sandbox.templates]]\nslug = "from-toml"\nname = "T"\nimage = "node:22"\n',
    });
    const result = await loadManifest(reader(r.dir, commit));
    expect(result.ok && result.manifest?.fileName).toBe('singulacomp.toml');
  });

  test('no manifest means the platform default image', async () => {
    const r = repo();
    const commit = r.commit({ 'README.md': 'hi' });
    expect(await loadManifest(reader(r.dir, commit))).toEqual({ ok: true, manifest: null, warnings: [] });
  });

  test('a manifest that is not UTF-8 is an error at the file', async () => {
    const r = repo();
    const commit = r.commit({ 'singulacomp.yaml': Buffer.from([0x73, 0x61, 0xff, 0xfe]) });
    expect(await loadManifest(reader(r.dir, commit))).toEqual({
      ok: false,
      errors: [{ field: ['singulacomp.yaml'], message: 'is not valid UTF-8; save it as UTF-8' }],
      warnings: [],
    });
  });
});
