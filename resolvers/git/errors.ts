// Error classes of the git service and the one table that maps git's stderr onto them. Every message
// and every stored stderr passes through `redact` first: no upstream credential leaves this module.

/** Base class of every error the git service throws; never thrown itself. */
export class GitError extends Error {
  override name = 'GitError';
}

/** Thrown when a branch, tag, ref or sha does not exist in the upstream repository. */
export class GitRefNotFoundError extends GitError {
  override name = 'GitRefNotFoundError';
  constructor(
    readonly ref: string,
    readonly repositoryUrl: string,
  ) {
    super(
      `Ref '${ref}' does not exist in ${repositoryUrl}: push it first or pass an existing branch, tag or full commit sha.`,
    );
  }
}

/** Thrown when cutting a branch whose name already exists upstream; the existing ref is left untouched. */
export class GitBranchExistsError extends GitError {
  override name = 'GitBranchExistsError';
  constructor(
    readonly branch: string,
    readonly repositoryUrl: string,
  ) {
    super(`Branch '${branch}' already exists in ${repositoryUrl}: choose another branch name.`);
  }
}

/** Thrown when the upstream cannot be reached: bad URL, missing repository, refused credential or timeout. */
export class GitRepositoryUnreachableError extends GitError {
  override name = 'GitRepositoryUnreachableError';
  constructor(
    readonly repositoryUrl: string,
    readonly reason: string,
    readonly hint: string,
  ) {
    super(`Cannot reach git repository ${repositoryUrl}: ${reason}. ${hint}`);
  }
}

/** Thrown when a git command fails for a reason that is neither a missing ref nor an unreachable upstream. */
export class GitCommandError extends GitError {
  override name = 'GitCommandError';
  constructor(
    /** The git sub-command and its arguments (never contains a credential). */
    readonly args: readonly string[],
    readonly exitCode: number | null,
    /** Redacted, truncated stderr. */
    readonly stderr: string,
    detail?: string,
  ) {
    super(
      `git ${gitSubcommand(args)} failed${exitCode === null ? '' : ` (exit ${exitCode})`}: ${detail ?? (firstLines(stderr) || 'no error output')}`,
    );
  }
}

/** Thrown when a branch or ref name breaks `git check-ref-format` rules (or could be read as an option). */
export class GitInvalidRefNameError extends GitError {
  override name = 'GitInvalidRefNameError';
  constructor(
    readonly refName: string,
    readonly problem: string,
  ) {
    super(
      `Invalid git ref name ${JSON.stringify(refName)}: it ${problem}. Use letters, digits, '-', '_', '.' and '/'.`,
    );
  }
}

/** Thrown when a repository URL is not an https/http/ssh/git/file URL, scp-like address or local path. */
export class GitInvalidUrlError extends GitError {
  override name = 'GitInvalidUrlError';
  constructor(readonly problem: string) {
    super(
      `Invalid repository URL: ${problem}. Use https://host/owner/repo.git, ssh://…, user@host:path, file://… or an absolute path.`,
    );
  }
}

/** Thrown when a path passed to readFileAtRef is absolute, empty or escapes the repository. */
export class GitInvalidPathError extends GitError {
  override name = 'GitInvalidPathError';
  constructor(
    readonly path: string,
    readonly problem: string,
  ) {
    super(
      `Invalid repository path ${JSON.stringify(path)}: it ${problem}. Pass a relative path like 'dir/file'.`,
    );
  }
}

type UnreachableRow = { pattern: RegExp; reason: string; hint: string };

/**
 * The one table mapping git stderr to "upstream unreachable" causes. Order matters: the first match
 * wins. Anything that matches no row is a GitCommandError.
 */
export const UNREACHABLE_TABLE: readonly UnreachableRow[] = [
  {
    pattern:
      /Authentication failed|HTTP Basic: Access denied|could not read (Username|Password)|terminal prompts disabled|returned error: 40[13]/i,
    reason: 'authentication failed',
    hint: 'Check that the project credential is set, not expired, and can read and push this repository.',
  },
  {
    pattern: /Permission denied \(publickey|Host key verification failed/i,
    reason: 'ssh authentication failed',
    hint: 'Use an https URL with a token, or install an ssh key the server accepts.',
  },
  {
    pattern:
      /Repository not found|returned error: 404|does not appear to be a git repository|not a git repository|No such file or directory/i,
    reason: 'repository not found',
    hint: 'Check the repository URL; private repositories also answer "not found" when the credential lacks access.',
  },
  {
    pattern: /Could not resolve host|Name or service not known|nodename nor servname/i,
    reason: 'host name does not resolve',
    hint: 'Check the host part of the repository URL.',
  },
  {
    pattern:
      /Connection refused|Failed to connect|Connection timed out|Network is unreachable|No route to host|Could not connect/i,
    reason: 'connection failed',
    hint: 'Check the host and port in the repository URL and that the server is up.',
  },
  {
    pattern: /SSL|certificate/i,
    reason: 'TLS handshake failed',
    hint: 'Check that the server presents a certificate this machine trusts.',
  },
  {
    pattern:
      /transport '[^']*' not allowed|unable to access|Could not read from remote repository|returned error: 5\d\d|early EOF|the remote end hung up/i,
    reason: 'transport error',
    hint: 'Check the repository URL and that the server is up, then retry.',
  },
];

/** Returns the unreachable cause for a git stderr, or null when the failure is something else. */
export function classifyUnreachable(stderr: string): UnreachableRow | null {
  return UNREACHABLE_TABLE.find((row) => row.pattern.test(stderr)) ?? null;
}

/** Replaces every secret (and any password embedded in a URL) with `***`. */
export function redact(text: string, secrets: readonly string[]): string {
  let out = text;
  for (const secret of secrets) {
    if (secret.length >= 4) out = out.split(secret).join('***');
  }
  return out
    .replace(/([a-z][a-z0-9+.-]*:\/\/)[^/@\s]*@/gi, '$1***@')
    .replace(/(Basic|Bearer) \S+/g, '$1 ***');
}

/** The sub-command in a git argument list (`push` in `--git-dir=x push …`, `clone` in `-C dir clone`). */
export function gitSubcommand(args: readonly string[]): string {
  for (let index = 0; index < args.length; index += 1) {
    const arg = args[index] ?? '';
    if (arg === '-C' || arg === '-c') index += 1;
    else if (!arg.startsWith('-')) return arg;
  }
  return '';
}

function firstLines(text: string): string {
  return text
    .split('\n')
    .map((line) => line.trim())
    .filter((line) => line.length > 0)
    .slice(0, 3)
    .join(' | ');
}
