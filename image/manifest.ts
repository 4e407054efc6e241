// The repository manifest (R-IMG-1): `singulacomp.yaml` at the repo root, or the legacy
// `singulacomp.toml` with the same fields. Parsing never throws: every problem becomes a
// `FieldError` with a path and a fix, and all of them are reported at once.
//
// Unknown keys are warnings, not errors: a manifest written for a newer server must still boot
// sessions on an older one. Typos are caught anyway by the warning's "did you mean" hint and,
// for the keys that matter, by the missing-field errors they cause.
import { parse as parseToml, TomlError } from 'smol-toml';
import { LineCounter, parseDocument } from 'yaml';
import type { HardwareSpec } from './spec';
import { type FieldError, HARDWARE_SPEC_KEYS, resolveHardwareSpec } from './spec';

export type { FieldError } from './spec';

export type ManifestFileName = 'singulacomp.yaml' | 'singulacomp.toml';

/** Lookup order at the repo root: the YAML manifest wins over the legacy TOML one. */
export const MANIFEST_FILE_NAMES: readonly ManifestFileName[] = ['singulacomp.yaml', 'singulacomp.toml'];

export const MAX_MANIFEST_BYTES = 256 * 1024;
export const MAX_TEMPLATES = 100;
const MAX_SLUG_LENGTH = 63;
const MAX_NAME_LENGTH = 200;
const MAX_PATH_LENGTH = 1024;
const MAX_IMAGE_LENGTH = 512;

export type TemplateSource = { kind: 'dockerfile'; path: string } | { kind: 'image'; reference: string };

export interface SandboxTemplate {
  slug: string;
  name: string;
  /** `path` is normalised and relative to the repository root. */
  source: TemplateSource;
  /** Defaults filled and platform limits applied (R-SBX-4). */
  spec: HardwareSpec;
}

export interface Manifest {
  fileName: ManifestFileName;
  templates: SandboxTemplate[];
  /** Slug of the default template; null means the platform default image. */
  defaultSlug: string | null;
}

export type ParseManifestResult =
  | { ok: true; manifest: Manifest; warnings: string[] }
  | { ok: false; errors: FieldError[]; warnings: string[] };

const SLUG_PATTERN = /^[a-z0-9]+(?:-[a-z0-9]+)*$/;
const TEMPLATE_KEYS = ['slug', 'name', 'dockerfile', 'image', ...HARDWARE_SPEC_KEYS];
const SANDBOX_KEYS = ['templates', 'default'];
const ROOT_KEYS = ['sandbox'];

// Docker reference grammar (distribution/reference), anchored: [domain/]path[:tag][@digest].
const DOMAIN_COMPONENT = '(?:[a-zA-Z0-9]|[a-zA-Z0-9][a-zA-Z0-9-]*[a-zA-Z0-9])';
const DOMAIN = `(?:${DOMAIN_COMPONENT}(?:\\.${DOMAIN_COMPONENT})*|\\[[0-9a-fA-F:]+\\])(?::[0-9]+)?`;
const PATH_COMPONENT = '[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*';
const IMAGE_REFERENCE = new RegExp(
  `^(?:${DOMAIN}/)?${PATH_COMPONENT}(?:/${PATH_COMPONENT})*(?::[\\w][\\w.-]{0,127})?(?:@[A-Za-z][A-Za-z0-9]*(?:[-_+.][A-Za-z][A-Za-z0-9]*)*:[0-9a-fA-F]{32,})?$`,
);

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value) && !(value instanceof Date);
}

function typeName(value: unknown): string {
  if (value === null || value === undefined) return 'nothing';
  if (Array.isArray(value)) return 'a list';
  if (value instanceof Date) return 'a date';
  if (typeof value === 'object') return 'a mapping';
  return `a ${typeof value}`;
}

function levenshtein(a: string, b: string): number {
  let previous = Array.from({ length: b.length + 1 }, (_, i) => i);
  for (let i = 1; i <= a.length; i++) {
    const current = [i];
    for (let j = 1; j <= b.length; j++) {
      const cost = a[i - 1] === b[j - 1] ? 0 : 1;
      current[j] = Math.min(current[j - 1]! + 1, previous[j]! + 1, previous[j - 1]! + cost);
    }
    previous = current;
  }
  return previous[b.length]!;
}

function warnUnknownKeys(
  object: Record<string, unknown>,
  known: readonly string[],
  path: string[],
  warnings: string[],
): void {
  for (const key of Object.keys(object).sort()) {
    if (known.includes(key)) continue;
    const nearest = known
      .map((candidate) => ({ candidate, distance: levenshtein(key.toLowerCase(), candidate) }))
      .sort((a, b) => a.distance - b.distance)[0];
    const hint = nearest && nearest.distance <= 2 ? ` (did you mean ${nearest.candidate}?)` : '';
    const where = path.length > 0 ? `${path.join('.')}.` : '';
    warnings.push(`${where}${key}: unknown key, ignored${hint}`);
  }
}

/**
 * Normalises a Dockerfile path and proves it stays inside the repository. Returns the
 * normalised repo-relative path, or a message saying what is wrong with it.
 */
export function normalizeRepoPath(raw: string): { ok: true; path: string } | { ok: false; message: string } {
  if (raw.length === 0)
    return { ok: false, message: 'is empty; give a path relative to the repository root' };
  if (raw.length > MAX_PATH_LENGTH)
    return { ok: false, message: `is longer than ${MAX_PATH_LENGTH} characters` };
  // biome-ignore lint/suspicious/noControlCharactersInRegex: rejecting control characters is the point
  if (/[\u0000-\u001f\u007f]/.test(raw)) {
    return { ok: false, message: 'contains control characters (NUL, newline, …); remove them' };
  }
  if (raw.includes('\\')) {
    return { ok: false, message: 'contains a backslash; use forward slashes, e.g. docker/Dockerfile' };
  }
  if (raw.startsWith('/') || /^[A-Za-z]:/.test(raw) || raw.startsWith('~')) {
    return {
      ok: false,
      message: 'must be relative to the repository root, e.g. docker/Dockerfile, not absolute',
    };
  }
  const segments: string[] = [];
  for (const segment of raw.split('/')) {
    if (segment === '' || segment === '.') continue;
    if (segment === '..') {
      if (segments.length === 0) {
        return {
          ok: false,
          message: 'escapes the repository with ".."; keep the Dockerfile inside the repository',
        };
      }
      segments.pop();
      continue;
    }
    segments.push(segment);
  }
  if (segments.length === 0) return { ok: false, message: 'names the repository root, not a file' };
  if (raw.endsWith('/'))
    return { ok: false, message: 'ends with "/"; name the Dockerfile itself, not a directory' };
  if (segments[0] === '.git')
    return { ok: false, message: 'points into .git; name a file tracked in the repository' };
  return { ok: true, path: segments.join('/') };
}

function syntaxErrors(fileName: ManifestFileName, text: string): { value: unknown; errors: FieldError[] } {
  if (fileName === 'singulacomp.toml') {
    try {
      return { value: parseToml(text), errors: [] };
    } catch (error) {
      const firstLine =
        error instanceof Error ? (error.message.split('\n')[0] ?? error.message) : String(error);
      const at = error instanceof TomlError ? `line ${error.line}, column ${error.column}: ` : '';
      return {
        value: undefined,
        errors: [{ field: [fileName], message: `${at}${firstLine}; fix the TOML syntax` }],
      };
    }
  }
  const lineCounter = new LineCounter();
  const document = parseDocument(text, { uniqueKeys: true, prettyErrors: false, lineCounter });
  if (document.errors.length > 0) {
    return {
      value: undefined,
      errors: document.errors.map((error) => {
        const position = lineCounter.linePos(error.pos[0]);
        const at = `line ${position.line}, column ${position.col}: `;
        return { field: [fileName], message: `${at}${error.message.split('\n')[0]}; fix the YAML syntax` };
      }),
    };
  }
  try {
    // maxAliasCount bounds alias expansion ("billion laughs").
    return { value: document.toJS({ maxAliasCount: 100 }), errors: [] };
  } catch (error) {
    const message = error instanceof Error ? error.message : String(error);
    return {
      value: undefined,
      errors: [{ field: [fileName], message: `${message}; use fewer YAML aliases` }],
    };
  }
}

function parseTemplate(
  raw: unknown,
  index: number,
  errors: FieldError[],
  warnings: string[],
): SandboxTemplate | null {
  const path = ['sandbox', 'templates', String(index)];
  if (!isRecord(raw)) {
    errors.push({
      field: path,
      message: `each template must be a mapping with slug and dockerfile or image (name optional); got ${typeName(raw)}`,
    });
    return null;
  }
  warnUnknownKeys(raw, TEMPLATE_KEYS, path, warnings);
  const before = errors.length;

  let slug = '';
  if (raw.slug === undefined || raw.slug === null) {
    errors.push({ field: [...path, 'slug'], message: 'is required: add a lowercase slug such as "web-app"' });
  } else if (typeof raw.slug !== 'string') {
    errors.push({
      field: [...path, 'slug'],
      message: `must be a string such as "web-app"; got ${typeName(raw.slug)}`,
    });
  } else if (raw.slug.length > MAX_SLUG_LENGTH || !SLUG_PATTERN.test(raw.slug)) {
    errors.push({
      field: [...path, 'slug'],
      message: `"${raw.slug.slice(0, 80)}" is not a slug: use 1–${MAX_SLUG_LENGTH} lowercase letters, digits and single hyphens, e.g. "web-app"`,
    });
  } else {
    slug = raw.slug;
  }

  // The display name is optional (the source document's own examples omit it): the slug stands in.
  let name = '';
  if (raw.name === undefined || raw.name === null) {
    name = slug;
  } else if (typeof raw.name !== 'string' || raw.name.trim() === '') {
    errors.push({
      field: [...path, 'name'],
      message: `must be a non-empty string; got ${typeName(raw.name)}`,
    });
  } else if (raw.name.length > MAX_NAME_LENGTH) {
    errors.push({ field: [...path, 'name'], message: `must be at most ${MAX_NAME_LENGTH} characters` });
  } else {
    name = raw.name.trim();
  }

  let source: TemplateSource | null = null;
  const hasDockerfile = raw.dockerfile !== undefined && raw.dockerfile !== null;
  const hasImage = raw.image !== undefined && raw.image !== null;
  if (hasDockerfile && hasImage) {
    errors.push({
      field: [...path, 'dockerfile'],
      message: 'give either dockerfile or image, not both; remove one',
    });
  } else if (!hasDockerfile && !hasImage) {
    errors.push({
      field: path,
      message: 'needs exactly one of dockerfile (a path in the repository) or image (e.g. "node:22")',
    });
  } else if (hasDockerfile) {
    if (typeof raw.dockerfile !== 'string') {
      errors.push({
        field: [...path, 'dockerfile'],
        message: `must be a path string such as "docker/Dockerfile"; got ${typeName(raw.dockerfile)}`,
      });
    } else {
      const normalized = normalizeRepoPath(raw.dockerfile);
      if (normalized.ok) source = { kind: 'dockerfile', path: normalized.path };
      else errors.push({ field: [...path, 'dockerfile'], message: normalized.message });
    }
  } else if (typeof raw.image !== 'string') {
    errors.push({
      field: [...path, 'image'],
      message: `must be an image reference such as "node:22"; got ${typeName(raw.image)}`,
    });
  } else if (raw.image.length > MAX_IMAGE_LENGTH || !IMAGE_REFERENCE.test(raw.image)) {
    errors.push({
      field: [...path, 'image'],
      message: `"${raw.image.slice(0, 80)}" is not an image reference; use [registry/]name[:tag][@digest], e.g. "ghcr.io/acme/dev:1.2"`,
    });
  } else {
    source = { kind: 'image', reference: raw.image };
  }

  const hardware = resolveHardwareSpec(raw, path);
  errors.push(...hardware.errors);
  warnings.push(...hardware.warnings);

  if (errors.length > before || source === null) return null;
  return { slug, name, source, spec: hardware.spec };
}

/** Parses and validates a manifest; never throws. */
export function parseManifest(fileName: ManifestFileName, text: string): ParseManifestResult {
  const warnings: string[] = [];
  const size = Buffer.byteLength(text, 'utf8');
  if (size > MAX_MANIFEST_BYTES) {
    return {
      ok: false,
      errors: [
        {
          field: [fileName],
          message: `is ${size} bytes; the limit is ${MAX_MANIFEST_BYTES} bytes (256 KiB), so shorten it`,
        },
      ],
      warnings,
    };
  }
  const source = text.startsWith('\uFEFF') ? text.slice(1) : text;
  const parsed = syntaxErrors(fileName, source);
  if (parsed.errors.length > 0) return { ok: false, errors: parsed.errors, warnings };

  const root = parsed.value;
  if (!isRecord(root)) {
    return {
      ok: false,
      errors: [
        {
          field: [fileName],
          message: `the top level must be a mapping with a sandbox key; got ${typeName(root)}`,
        },
      ],
      warnings,
    };
  }
  warnUnknownKeys(root, ROOT_KEYS, [], warnings);
  const errors: FieldError[] = [];
  const sandbox = root.sandbox;
  if (!isRecord(sandbox)) {
    errors.push({
      field: ['sandbox'],
      message:
        sandbox === undefined
          ? 'is required: add a sandbox mapping with a templates list'
          : `must be a mapping with a templates list; got ${typeName(sandbox)}`,
    });
    return { ok: false, errors, warnings };
  }
  warnUnknownKeys(sandbox, SANDBOX_KEYS, ['sandbox'], warnings);

  const templates: SandboxTemplate[] = [];
  const rawTemplates = sandbox.templates;
  let rawTemplateCount = 0;
  if (rawTemplates === undefined || rawTemplates === null) {
    errors.push({
      field: ['sandbox', 'templates'],
      message: 'is required: add a list of templates, each with slug and dockerfile or image',
    });
  } else if (!Array.isArray(rawTemplates)) {
    errors.push({
      field: ['sandbox', 'templates'],
      message: `must be a list of templates; got ${typeName(rawTemplates)}`,
    });
  } else if (rawTemplates.length > MAX_TEMPLATES) {
    errors.push({
      field: ['sandbox', 'templates'],
      message: `has ${rawTemplates.length} templates; the limit is ${MAX_TEMPLATES}, so remove some`,
    });
  } else {
    rawTemplateCount = rawTemplates.length;
    if (rawTemplateCount === 0)
      warnings.push('sandbox.templates: empty; sessions use the platform default image');
    const firstIndexBySlug = new Map<string, number>();
    rawTemplates.forEach((raw, index) => {
      const template = parseTemplate(raw, index, errors, warnings);
      const slug = isRecord(raw) && typeof raw.slug === 'string' ? raw.slug : null;
      if (slug !== null) {
        const first = firstIndexBySlug.get(slug);
        if (first !== undefined) {
          errors.push({
            field: ['sandbox', 'templates', String(index), 'slug'],
            message: `"${slug}" is already used by sandbox.templates.${first}; slugs must be unique`,
          });
          return;
        }
        firstIndexBySlug.set(slug, index);
      }
      if (template) templates.push(template);
    });
  }

  let defaultSlug: string | null = null;
  const rawDefault = sandbox.default;
  if (rawDefault !== undefined && rawDefault !== null) {
    if (typeof rawDefault !== 'string') {
      errors.push({
        field: ['sandbox', 'default'],
        message: `must be the slug of one of the templates; got ${typeName(rawDefault)}`,
      });
    } else if (Array.isArray(rawTemplates)) {
      const known = rawTemplates.filter(isRecord).map((t) => t.slug);
      if (!known.includes(rawDefault)) {
        const slugs = known.filter((s): s is string => typeof s === 'string');
        errors.push({
          field: ['sandbox', 'default'],
          message: `"${rawDefault.slice(0, 80)}" is not a template slug; use one of: ${slugs.length > 0 ? slugs.join(', ') : '(no templates defined)'}, or remove default`,
        });
      } else {
        defaultSlug = rawDefault;
      }
    }
  }

  if (errors.length > 0) return { ok: false, errors, warnings };
  return { ok: true, manifest: { fileName, templates, defaultSlug }, warnings };
}

/** The template sessions use when none is chosen, or null for the platform default image. */
export function defaultTemplate(manifest: Manifest): SandboxTemplate | null {
  if (manifest.defaultSlug === null) return null;
  return manifest.templates.find((template) => template.slug === manifest.defaultSlug) ?? null;
}

export interface ManifestFileSource {
  readFile(path: string): Promise<Buffer | null>;
}

export type LoadManifestResult = ParseManifestResult | { ok: true; manifest: null; warnings: string[] };

/**
 * Reads the manifest at the repository root (e.g. through a git tree reader at a commit).
 * No manifest file: `{ ok: true, manifest: null }`, i.e. the platform default image.
 */
export async function loadManifest(files: ManifestFileSource): Promise<LoadManifestResult> {
  const warnings: string[] = [];
  for (const fileName of MANIFEST_FILE_NAMES) {
    const bytes = await files.readFile(fileName);
    if (bytes === null) continue;
    if (fileName === 'singulacomp.yaml' && (await files.readFile('singulacomp.toml')) !== null) {
      warnings.push('singulacomp.toml: ignored because singulacomp.yaml exists; delete one of them');
    }
    if (bytes.length > MAX_MANIFEST_BYTES) {
      return {
        ok: false,
        errors: [
          {
            field: [fileName],
            message: `is ${bytes.length} bytes; the limit is ${MAX_MANIFEST_BYTES} bytes (256 KiB), so shorten it`,
          },
        ],
        warnings,
      };
    }
    let text: string;
    try {
      text = new TextDecoder('utf-8', { fatal: true }).decode(bytes);
    } catch {
      return {
        ok: false,
        errors: [{ field: [fileName], message: 'is not valid UTF-8; save it as UTF-8' }],
        warnings,
      };
    }
    const result = parseManifest(fileName, text);
    return { ...result, warnings: [...warnings, ...result.warnings] };
  }
  return { ok: true, manifest: null, warnings };
}
