// Content-addressed snapshot keys (R-IMG-3). The key is SHA-256 over a canonical, length-prefixed
// encoding of: the Dockerfile bytes, every build-context file its COPY/ADD lines (and RUN bind
// mounts of the context) pull in — path, git mode and bytes, after .dockerignore — the hardware
// spec, the runtime version, the runtime-layer format and — for the `package` runtime source — the
// source and its pinned tarball digest. Same inputs → same key → the snapshot is
// reused; a byte changed anywhere in those inputs → a new key → a rebuild. Files the build cannot
// see do not take part, so editing the README does not rebuild the image.
//
// The build context is the repository root unless `contextDir` says otherwise. Sources we cannot
// resolve statically (variables such as `COPY $DIR .`) make the whole context part of the key:
// that can only cause a needless rebuild, never a stale image. `COPY --from=…` and remote `ADD`
// URLs are not context files and are left out (a moving remote tag is not detected).
import { createHash, type Hash } from 'node:crypto';
import type { HardwareSpec } from './spec';
import { dockerfileForImage, RUNTIME_LAYER_FORMAT, type RuntimeSource } from './dockerfile';
import { type ParsedDockerfile, parseDockerfile, splitArguments, splitFlags } from './dockerfile-parser';
import type { SandboxTemplate } from './manifest';
import type { RepoFileEntry, RepoFileReader } from './repo-files';

const KEY_SCHEME = 'singulacomp-snapshot-key/v1';
/** Reads kept in flight at once: enough to keep git busy, few enough to bound memory. */
const READ_WINDOW = 32;

export interface SnapshotKeyInput {
  /** The Dockerfile as stored in the repository (before the runtime layer is appended). */
  dockerfile: string | Uint8Array;
  /** Its repo-relative path, used to find `<path>.dockerignore`; null for a synthetic Dockerfile. */
  dockerfilePath?: string | null;
  /** Build-context directory, repo-relative. @default '' (the repository root) */
  contextDir?: string;
  spec: HardwareSpec;
  runtimeVersion: string;
  /**
   * How the runtime layer installs the runtime (image/dockerfile.ts). `image` adds nothing to the
   * hash, so keys of images built that way are the ones computed before sources existed.
   * @default 'image'
   */
  runtimeSource?: RuntimeSource;
  /** The pinned tarball digest of the `package` source, if any; part of its key. */
  runtimeSha256?: string | null;
  /** false: the layer without its package floor (image/dockerfile.ts); part of the key. @default true */
  packageFloor?: boolean;
  /** The runtime image the layer copies from, when not the default one; part of the key. */
  runtimeImage?: string | null;
  files: Pick<RepoFileReader, 'listEntries' | 'readFile'>;
}

export interface SnapshotKey {
  /** 64 lowercase hex characters. */
  key: string;
  /** Context-relative paths of the files that went into the key, in hashing order. */
  contextFiles: string[];
  /** True when a source could not be resolved statically and the whole context was hashed. */
  wholeContext: boolean;
}

function frame(hash: Hash, value: string | Uint8Array): void {
  const bytes = typeof value === 'string' ? Buffer.from(value, 'utf8') : value;
  const length = Buffer.alloc(8);
  length.writeBigUInt64BE(BigInt(bytes.length));
  hash.update(length);
  hash.update(bytes);
}

/** Normalises a path inside the context; `..` cannot climb above the context root. */
function cleanContextPath(raw: string): string {
  const segments: string[] = [];
  for (const segment of raw.split('/')) {
    if (segment === '' || segment === '.') continue;
    if (segment === '..') segments.pop();
    else segments.push(segment);
  }
  return segments.join('/');
}

/** Go `filepath.Match` for one path segment: `*`, `?`, `[…]` / `[^…]`, backslash escapes. */
function segmentRegExp(pattern: string): string {
  let out = '';
  for (let i = 0; i < pattern.length; i++) {
    const ch = pattern[i]!;
    if (ch === '*') out += '[^/]*';
    else if (ch === '?') out += '[^/]';
    else if (ch === '\\' && i + 1 < pattern.length) out += escapeChar(pattern[++i]!);
    else if (ch === '[') {
      const close = pattern.indexOf(']', i + 2);
      if (close === -1) {
        out += '\\[';
        continue;
      }
      let body = pattern.slice(i + 1, close);
      const negate = body.startsWith('^');
      if (negate) body = body.slice(1);
      out += `[${negate ? '^' : ''}${body.replace(/[\]\\^]/g, '\\$&')}]`;
      i = close;
    } else out += escapeChar(ch);
  }
  return out;
}

function escapeChar(ch: string): string {
  return /[.*+?^${}()|[\]\\/]/.test(ch) ? `\\${ch}` : ch;
}

const GLOB = /[*?[]/;
const SYMLINK_MODE = '120000';

/** Does a COPY source match this file, either the file itself or a directory above it? */
function sourceMatcher(source: string): (path: string) => boolean {
  const clean = cleanContextPath(source);
  if (clean === '') return () => true;
  if (!GLOB.test(clean)) return (path) => path === clean || path.startsWith(`${clean}/`);
  const parts = clean.split('/').map((segment) => new RegExp(`^${segmentRegExp(segment)}$`));
  return (path) => {
    const segments = path.split('/');
    if (segments.length < parts.length) return false;
    return parts.every((regexp, i) => regexp.test(segments[i]!));
  };
}

interface IgnorePattern {
  regexp: RegExp;
  exclusion: boolean;
}

/** .dockerignore semantics of moby/patternmatcher: last match wins, a match on a parent dir counts. */
export function parseDockerignore(text: string): IgnorePattern[] {
  const patterns: IgnorePattern[] = [];
  for (const rawLine of text.replace(/\r\n?/g, '\n').split('\n')) {
    let line = rawLine.trim();
    if (line === '' || line.startsWith('#')) continue;
    const exclusion = line.startsWith('!');
    if (exclusion) line = line.slice(1).trim();
    const pattern = cleanContextPath(line);
    if (pattern === '') continue;
    let source = '^';
    for (let i = 0; i < pattern.length; i++) {
      const ch = pattern[i]!;
      if (ch === '*' && pattern[i + 1] === '*') {
        i++;
        if (pattern[i + 1] === '/') i++;
        source += i + 1 >= pattern.length ? '.*' : '(?:.*/)?';
      } else if (ch === '*') source += '[^/]*';
      else if (ch === '?') source += '[^/]';
      else if (ch === '[') {
        const close = pattern.indexOf(']', i + 2);
        if (close === -1) source += '\\[';
        else {
          source += segmentRegExp(pattern.slice(i, close + 1));
          i = close;
        }
      } else if (ch === '\\' && i + 1 < pattern.length) source += escapeChar(pattern[++i]!);
      else source += escapeChar(ch);
    }
    patterns.push({ regexp: new RegExp(`${source}$`), exclusion });
  }
  return patterns;
}

export function isDockerignored(patterns: readonly IgnorePattern[], path: string): boolean {
  const segments = path.split('/');
  let ignored = false;
  for (const pattern of patterns) {
    if (pattern.exclusion !== ignored) continue;
    let match = pattern.regexp.test(path);
    for (let i = 1; !match && i < segments.length; i++)
      match = pattern.regexp.test(segments.slice(0, i).join('/'));
    if (match) ignored = !pattern.exclusion;
  }
  return ignored;
}

const URL_SOURCE = /^(?:[a-z][a-z0-9+.-]*:\/\/|git@)/i;

/** The build-context sources a Dockerfile reads, or `wholeContext` when they cannot be pinned down. */
export function contextSources(parsed: ParsedDockerfile): { sources: string[]; wholeContext: boolean } {
  const sources: string[] = [];
  let wholeContext = false;
  const visit = (keyword: string, args: string, hasHeredocs: boolean): void => {
    const { flags, rest } = splitFlags(args);
    if (keyword === 'ONBUILD') {
      const space = rest.search(/\s/);
      if (space !== -1) visit(rest.slice(0, space).toUpperCase(), rest.slice(space).trim(), hasHeredocs);
      return;
    }
    if (keyword === 'RUN') {
      for (const flag of flags) {
        if (flag.name !== 'mount' || flag.value === null) continue;
        const options = new Map(
          flag.value.split(',').map((part) => {
            const eq = part.indexOf('=');
            return eq === -1 ? [part, 'true'] : [part.slice(0, eq), part.slice(eq + 1)];
          }),
        );
        if ((options.get('type') ?? 'bind') !== 'bind' || options.has('from')) continue;
        const source = options.get('source') ?? options.get('src') ?? '.';
        if (source.includes('$')) wholeContext = true;
        else sources.push(source);
      }
      return;
    }
    if (keyword !== 'COPY' && keyword !== 'ADD') return;
    if (flags.some((flag) => flag.name === 'from')) return;
    const parts = splitArguments(rest);
    for (const source of parts.slice(0, -1)) {
      if (hasHeredocs && source.startsWith('<<')) continue;
      if (keyword === 'ADD' && URL_SOURCE.test(source)) continue;
      if (source.includes('$')) wholeContext = true;
      else sources.push(source);
    }
  };
  for (const instruction of parsed.instructions) {
    visit(instruction.keyword, instruction.args, instruction.heredocs.length > 0);
  }
  return { sources, wholeContext };
}

/** Computes the content-addressed snapshot key for one Dockerfile at one commit. */
export async function computeSnapshotKey(input: SnapshotKeyInput): Promise<SnapshotKey> {
  const dockerfileBytes =
    typeof input.dockerfile === 'string' ? Buffer.from(input.dockerfile, 'utf8') : input.dockerfile;
  const contextDir = cleanContextPath(input.contextDir ?? '');
  const prefix = contextDir === '' ? '' : `${contextDir}/`;
  const parsed = parseDockerfile(Buffer.from(dockerfileBytes).toString('utf8'));
  const { sources, wholeContext: unresolved } = contextSources(parsed);
  let wholeContext = unresolved;

  let selected: Array<{ path: string; entry: RepoFileEntry }> = [];
  if (wholeContext || sources.length > 0) {
    const entries = await input.files.listEntries();
    // BuildKit prefers <Dockerfile>.dockerignore next to the Dockerfile over <context>/.dockerignore.
    const ignoreCandidates = [
      ...(input.dockerfilePath ? [`${input.dockerfilePath}.dockerignore`] : []),
      `${prefix}.dockerignore`,
    ];
    let ignore: IgnorePattern[] = [];
    for (const candidate of ignoreCandidates) {
      const bytes = await input.files.readFile(candidate);
      if (bytes !== null) {
        ignore = parseDockerignore(bytes.toString('utf8'));
        break;
      }
    }
    const context = entries
      .filter((entry) => entry.path.startsWith(prefix))
      .map((entry) => ({ path: entry.path.slice(prefix.length), entry }))
      .filter(({ path }) => ignore.length === 0 || !isDockerignored(ignore, path));
    const pick = (matchers: Array<(path: string) => boolean>) =>
      context.filter(({ path }) => matchers.some((matches) => matches(path)));
    selected = wholeContext ? context : pick(sources.map(sourceMatcher));
    // Docker follows a symlinked source (or a source below a symlinked directory) to files our
    // path matching cannot see: hash the whole context rather than risk a stale snapshot.
    if (!wholeContext) {
      const symlinks = context.filter(({ entry }) => entry.mode === SYMLINK_MODE).map(({ path }) => path);
      const throughSymlink = sources.some((source) => {
        const clean = cleanContextPath(source);
        return symlinks.some((link) => clean === link || clean.startsWith(`${link}/`));
      });
      if (throughSymlink || selected.some(({ entry }) => entry.mode === SYMLINK_MODE)) {
        wholeContext = true;
        selected = context;
      }
    }
    selected = selected.sort((a, b) => (a.path < b.path ? -1 : a.path > b.path ? 1 : 0));
  }

  const hash = createHash('sha256');
  frame(hash, KEY_SCHEME);
  frame(hash, 'runtime-layer-format');
  frame(hash, String(RUNTIME_LAYER_FORMAT));
  frame(hash, 'runtime-version');
  frame(hash, input.runtimeVersion);
  if ((input.runtimeSource ?? 'image') !== 'image') {
    frame(hash, 'runtime-source');
    frame(hash, input.runtimeSource as string);
    frame(hash, 'runtime-sha256');
    frame(hash, input.runtimeSha256 ?? '');
  }
  if (input.packageFloor === false) {
    frame(hash, 'package-floor');
    frame(hash, 'none');
  }
  if (input.runtimeImage) {
    frame(hash, 'runtime-image');
    frame(hash, input.runtimeImage);
  }
  frame(hash, 'spec');
  frame(hash, `cpu=${input.spec.cpu};memoryGiB=${input.spec.memoryGiB};diskGiB=${input.spec.diskGiB}`);
  frame(hash, 'dockerfile');
  frame(hash, dockerfileBytes);
  frame(hash, 'context-files');
  frame(hash, String(selected.length));

  // Keep a window of reads in flight and hash strictly in order.
  const reads: Array<Promise<Buffer | null>> = [];
  for (let i = 0; i < Math.min(READ_WINDOW, selected.length); i++) {
    reads.push(input.files.readFile(selected[i]!.entry.path));
  }
  for (let i = 0; i < selected.length; i++) {
    const next = i + READ_WINDOW;
    if (next < selected.length) reads.push(input.files.readFile(selected[next]!.entry.path));
    const { path, entry } = selected[i]!;
    const bytes = await reads[i]!;
    reads[i] = Promise.resolve(null);
    if (bytes === null)
      throw new Error(`snapshot key: ${entry.path} vanished from the tree while reading it`);
    frame(hash, path);
    frame(hash, entry.mode);
    frame(hash, bytes);
  }
  return { key: hash.digest('hex'), contextFiles: selected.map((item) => item.path), wholeContext };
}

export type TemplateSnapshotKeyResult =
  | ({ ok: true; dockerfile: string } & SnapshotKey)
  | { ok: false; error: string };

/**
 * The snapshot key for a manifest template: its Dockerfile read from the repository, or for an
 * `image:` template the one-line `FROM <image>` Dockerfile.
 */
export async function snapshotKeyForTemplate(
  template: SandboxTemplate,
  files: Pick<RepoFileReader, 'listEntries' | 'readFile'>,
  runtimeVersion: string,
  runtime: { source?: RuntimeSource; sha256?: string | null } = {},
): Promise<TemplateSnapshotKeyResult> {
  let dockerfile: Buffer;
  let dockerfilePath: string | null = null;
  if (template.source.kind === 'image') {
    dockerfile = Buffer.from(dockerfileForImage(template.source.reference), 'utf8');
  } else {
    dockerfilePath = template.source.path;
    const bytes = await files.readFile(dockerfilePath);
    if (bytes === null) {
      return {
        ok: false,
        error: `${dockerfilePath} (template ${template.slug}) is not a file in the repository; commit it or fix the path`,
      };
    }
    dockerfile = bytes;
  }
  const key = await computeSnapshotKey({
    dockerfile,
    dockerfilePath,
    spec: template.spec,
    runtimeVersion,
    runtimeSource: runtime.source ?? 'image',
    runtimeSha256: runtime.sha256 ?? null,
    files,
  });
  return { ok: true, dockerfile: dockerfile.toString('utf8'), ...key };
}
