// Input validation for the git service: ref names, repository URLs and in-repository paths. Runs
// before any git process starts, so nothing a caller passes can be read by git as an option.
import { resolve } from 'node:path';
import { GitInvalidPathError, GitInvalidRefNameError, GitInvalidUrlError } from './errors';

/** A repository as the rest of the server knows it; `credential` is the upstream token, if any. */
export interface RepoRef {
  /** https://, http://, ssh://, git://, file:// URL, scp-like `user@host:path`, or a local path. */
  url: string;
  /**
   * Token for https upstreams, sent as HTTP Basic auth: `user:password` when it contains a colon,
   * otherwise `x-access-token:<token>` (GitHub, Gitea; GitLab accepts any user name). Ignored for
   * ssh, git, file and local paths.
   */
  credential?: string | null;
}

/** A validated repository: the credential-free URL git is given, and the credential kept apart. */
export interface ParsedRepo {
  /** What git receives and what a clone's origin is set to; never contains a credential. */
  url: string;
  isHttp: boolean;
  credential: string | null;
}

const FULL_SHA = /^(?:[0-9a-f]{40}|[0-9a-f]{64})$/;
const FORBIDDEN_REF_CHARS = new Set([' ', '~', '^', ':', '?', '*', '[', '\\']);

export function isFullSha(ref: string): boolean {
  return FULL_SHA.test(ref);
}

/** Why `name` would fail `git check-ref-format --allow-onelevel` (plus our own limits), or null. */
export function refNameProblem(name: string): string | null {
  if (name.length === 0) return 'is empty';
  if (name.length > 255) return 'is longer than 255 characters';
  if (name.startsWith('-')) return "starts with '-'";
  if (name === '@') return "is '@'";
  if (name.startsWith('/') || name.endsWith('/')) return "starts or ends with '/'";
  if (name.includes('//')) return "contains '//'";
  if (name.includes('..')) return "contains '..'";
  if (name.includes('@{')) return "contains '@{'";
  if (name.endsWith('.')) return "ends with '.'";
  for (const char of name) {
    const code = char.codePointAt(0) ?? 0;
    if (code < 0x20 || code === 0x7f) return 'contains a control character';
    if (FORBIDDEN_REF_CHARS.has(char)) return `contains ${JSON.stringify(char)}`;
  }
  for (const component of name.split('/')) {
    if (component.startsWith('.')) return "has a path component starting with '.'";
    if (component.endsWith('.lock')) return "has a path component ending with '.lock'";
  }
  return null;
}

/** Validates a ref a caller wants resolved: a branch, tag, `refs/…` name, `HEAD` or full sha. */
export function assertRefName(ref: string): void {
  const problem = refNameProblem(ref);
  if (problem) throw new GitInvalidRefNameError(ref, problem);
}

/** Validates a branch name (without `refs/heads/`). */
export function assertBranchName(branch: string): void {
  assertRefName(branch);
  if (branch === 'HEAD') throw new GitInvalidRefNameError(branch, "is 'HEAD'");
  if (branch.startsWith('refs/')) {
    throw new GitInvalidRefNameError(branch, "starts with 'refs/' (pass the short branch name)");
  }
}

/** Full ref names to look a short ref up under, in order of preference (branches before tags). */
export function refCandidates(ref: string): string[] {
  if (ref === 'HEAD') return ['HEAD'];
  if (ref.startsWith('refs/')) return [ref];
  return [`refs/heads/${ref}`, `refs/tags/${ref}`];
}

/** Validates a path inside the repository and returns it without a leading `./`. */
export function normalizeRepoPath(path: string): string {
  const trimmed = path.replace(/^(\.\/)+/, '');
  if (trimmed.length === 0) throw new GitInvalidPathError(path, 'is empty');
  if (trimmed.startsWith('/')) throw new GitInvalidPathError(path, 'is absolute');
  if (trimmed.includes('\0')) throw new GitInvalidPathError(path, 'contains a NUL byte');
  for (const component of trimmed.split('/')) {
    if (component === '' || component === '.' || component === '..') {
      throw new GitInvalidPathError(path, "has an empty, '.' or '..' component");
    }
  }
  return trimmed;
}

const SCHEMES = new Set(['https:', 'http:', 'ssh:', 'git:', 'file:']);
// `[user@]host:path` as git reads it: a colon before any slash (`::` addresses are rejected first).
const SCP_LIKE = /^(?:[A-Za-z0-9._~%+-]+@)?(?:[A-Za-z0-9.-]+|\[[0-9A-Fa-f:.]+\]):./;

/** Validates a repository URL, splits off any credential embedded in an http(s) URL. */
export function parseRepo(repo: RepoRef): ParsedRepo {
  const raw = repo.url;
  const explicit = repo.credential ? repo.credential : null;
  if (typeof raw !== 'string' || raw.trim().length === 0) throw new GitInvalidUrlError('it is empty');
  if (raw !== raw.trim()) throw new GitInvalidUrlError('it has leading or trailing whitespace');
  if (raw.startsWith('-')) throw new GitInvalidUrlError("it starts with '-'");
  if ([...raw].some((char) => (char.codePointAt(0) ?? 0) < 0x20 || char === '\x7f')) {
    throw new GitInvalidUrlError('it contains a control character');
  }
  if (explicit !== null && /[\r\n\0]/.test(explicit)) {
    throw new GitInvalidUrlError('the credential contains a line break or NUL byte');
  }

  if (/^[A-Za-z][A-Za-z0-9+.-]*:\/\//.test(raw)) {
    let url: URL;
    try {
      url = new URL(raw);
    } catch {
      throw new GitInvalidUrlError('it cannot be parsed');
    }
    if (!SCHEMES.has(url.protocol)) throw new GitInvalidUrlError(`scheme '${url.protocol}' is not allowed`);
    if (url.protocol === 'https:' || url.protocol === 'http:') {
      let embedded: string | null = null;
      if (url.username || url.password) {
        const user = decodeURIComponent(url.username);
        embedded = url.password ? `${user}:${decodeURIComponent(url.password)}` : user;
        url.username = '';
        url.password = '';
      }
      if (url.search || url.hash) throw new GitInvalidUrlError('it has a query string or fragment');
      return { url: url.toString(), isHttp: true, credential: explicit ?? embedded };
    }
    if (url.password)
      throw new GitInvalidUrlError('it embeds a password (only http(s) credentials are supported)');
    return { url: raw, isHttp: false, credential: null };
  }
  if (raw.includes('::'))
    throw new GitInvalidUrlError("remote-helper addresses ('<transport>::<address>') are not allowed");
  if (!raw.startsWith('/') && !raw.startsWith('.') && SCP_LIKE.test(raw)) {
    return { url: raw, isHttp: false, credential: null };
  }
  // A local path; made absolute so git can never read it as `host:path`.
  return { url: resolve(raw), isHttp: false, credential: null };
}
