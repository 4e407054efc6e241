import { execFileSync } from 'node:child_process';
import { describe, expect, test } from 'vitest';
import { classifyUnreachable, redact, UNREACHABLE_TABLE } from '../../resolvers/git/errors';
import { GitInvalidPathError, GitInvalidUrlError } from '../../resolvers/git/git';
import { normalizeRepoPath, parseRepo, refNameProblem } from '../../resolvers/git/refs';

function gitAccepts(name: string): boolean {
  try {
    execFileSync('git', ['check-ref-format', '--allow-onelevel', name], { stdio: 'ignore' });
    return true;
  } catch {
    return false;
  }
}

describe('ref name validation', () => {
  const names = [
    'main',
    'feature/x',
    'release-1.2',
    'v1.0.0',
    '6f1c2a4e-8d7b-4c3a-9e21-0b5d7f3a1c90',
    'refs/heads/main',
    'HEAD',
    'ünïcode',
    'a..b',
    'a b',
    'a~1',
    'a^',
    'a:b',
    'a?',
    'a*',
    'a[b',
    'a\\b',
    'a@{1}',
    '@',
    '/lead',
    'trail/',
    'a//b',
    '.hidden',
    'a/.hidden',
    'x.lock',
    'dot.',
    'del\u007f',
    'nl\nx',
    '',
  ];

  test.each(names)('agrees with git check-ref-format about %j', (name) => {
    expect(refNameProblem(name) === null).toBe(gitAccepts(name));
  });

  test('rejects names git accepts but that would read as an option', () => {
    expect(gitAccepts('-x')).toBe(false);
    expect(refNameProblem('-x')).toBe("starts with '-'");
    expect(refNameProblem('--upload-pack=evil')).toBe("starts with '-'");
  });
});

describe('repository URL parsing', () => {
  test.each([
    ['https://github.com/org/repo.git', 'https://github.com/org/repo.git', null],
    [
      'https://x-access-token:tok@github.com/org/repo.git',
      'https://github.com/org/repo.git',
      'x-access-token:tok',
    ],
    ['https://tok@github.com/org/repo.git', 'https://github.com/org/repo.git', 'tok'],
    ['ssh://git@github.com/org/repo.git', 'ssh://git@github.com/org/repo.git', null],
    ['git@github.com:org/repo.git', 'git@github.com:org/repo.git', null],
    ['file:///srv/repo.git', 'file:///srv/repo.git', null],
    ['/srv/repo', '/srv/repo', null],
  ])('parses %s', (url, expectedUrl, credential) => {
    expect(parseRepo({ url })).toMatchObject({ url: expectedUrl, credential });
  });

  test('prefers an explicit credential over one in the URL', () => {
    expect(parseRepo({ url: 'https://u:p@h.test/r.git', credential: 'tok' }).credential).toBe('tok');
  });

  test.each([
    '',
    '-oProxyCommand=evil',
    'ext::sh -c touch% /tmp/pwned',
    'fd::17',
    'ftp://host/repo.git',
    'https://host/repo.git?x=1',
    'https://host/repo\n.git',
    ' /srv/repo',
  ])('rejects %j', (url) => {
    expect(() => parseRepo({ url })).toThrow(GitInvalidUrlError);
  });
});

describe('repository paths', () => {
  test('strips a leading ./ and rejects paths that escape the tree', () => {
    expect(normalizeRepoPath('./a/b.txt')).toBe('a/b.txt');
    for (const path of ['', '/etc/passwd', '../x', 'a/../b', 'a//b', 'a/./b', 'nul\0']) {
      expect(() => normalizeRepoPath(path), path).toThrow(GitInvalidPathError);
    }
  });
});

describe('unreachable classification table', () => {
  const samples: Record<string, string> = {
    'authentication failed':
      "fatal: could not read Username for 'https://github.com': terminal prompts disabled",
    'ssh authentication failed': 'git@github.com: Permission denied (publickey).',
    'repository not found': "remote: Repository not found.\nfatal: repository 'https://x/y.git/' not found",
    'host name does not resolve':
      "fatal: unable to access 'https://nope.invalid/': Could not resolve host: nope.invalid",
    'connection failed':
      "fatal: unable to access 'https://127.0.0.1:1/x/': Failed to connect to 127.0.0.1 port 1: Connection refused",
    'TLS handshake failed':
      "fatal: unable to access 'https://h/': SSL certificate problem: self signed certificate",
    'transport error': "fatal: unable to access 'https://h/': The requested URL returned error: 502",
  };

  test('has one sample per row', () => {
    expect(Object.keys(samples)).toEqual(UNREACHABLE_TABLE.map((row) => row.reason));
  });

  test.each(UNREACHABLE_TABLE.map((row) => [row.reason, row] as const))('maps %s', (reason) => {
    expect(classifyUnreachable(samples[reason] ?? '')?.reason).toBe(reason);
  });

  test('leaves other failures to GitCommandError', () => {
    expect(classifyUnreachable("error: cannot lock ref 'refs/heads/a': reference already exists")).toBeNull();
  });
});

describe('redaction', () => {
  test('removes secrets, URL user info and authorization values', () => {
    const text = 'token tok-123456 https://user:pw@host/x Authorization: Basic dXNlcjpwYXNz';
    const redacted = redact(text, ['tok-123456']);
    expect(redacted).toBe('token *** https://***@host/x Authorization: Basic ***');
  });
});
