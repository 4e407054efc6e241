// The small Dockerfile reader the runtime layer and snapshot keys need: parser directives, line
// continuations with the file's escape character, comments and heredocs.

export interface DockerfileHeredoc {
  name: string;
  body: string;
}

export interface DockerfileInstruction {
  /** Upper-cased instruction keyword, e.g. `COPY`. */
  keyword: string;
  /** Everything after the keyword, continuations joined, comment lines inside them dropped. */
  args: string;
  heredocs: DockerfileHeredoc[];
  /** 1-based physical lines the instruction (including heredoc bodies) spans. */
  startLine: number;
  endLine: number;
}

export interface ParsedDockerfile {
  /** Parser directives (`# syntax=…`, `# escape=…`, `# check=…`), keys lower-cased. */
  directives: Record<string, string>;
  escapeChar: '\\' | '`';
  instructions: DockerfileInstruction[];
  /** The file ends inside a line continuation (the last instruction ends with the escape char). */
  danglingContinuation: boolean;
  /** Name of a heredoc never terminated before the end of the file, if any. */
  unterminatedHeredoc: string | null;
}

const DIRECTIVE = /^#\s*([a-zA-Z][a-zA-Z0-9_-]*)\s*=\s*(.*?)\s*$/;
const HEREDOC_KEYWORDS = new Set(['RUN', 'COPY', 'ADD']);
const HEREDOC_MARKER = /^<<(-?)(["']?)([A-Za-z_][A-Za-z0-9_.-]*)\2/;

/** Heredoc markers (`<<EOF`, `<<-"EOF"`) outside quotes; `<<<` here-strings are not heredocs. */
function heredocMarkers(args: string): Array<{ stripTabs: boolean; name: string }> {
  const markers: Array<{ stripTabs: boolean; name: string }> = [];
  let quote: string | null = null;
  for (let i = 0; i < args.length; i++) {
    const ch = args[i]!;
    if (quote !== null) {
      if (ch === quote) quote = null;
      else if (ch === '\\' && quote === '"') i++;
      continue;
    }
    if (ch === '"' || ch === "'") {
      quote = ch;
      continue;
    }
    if (ch !== '<' || args[i + 1] !== '<' || args[i + 2] === '<' || args[i - 1] === '<') continue;
    const match = HEREDOC_MARKER.exec(args.slice(i));
    if (match) {
      markers.push({ stripTabs: match[1] === '-', name: match[3]! });
      i += match[0].length - 1;
    }
  }
  return markers;
}

/** Strips a BOM and turns CRLF (and lone CR) line endings into LF. */
export function normalizeDockerfileText(text: string): string {
  const withoutBom = text.startsWith('\uFEFF') ? text.slice(1) : text;
  return withoutBom.replace(/\r\n?/g, '\n');
}

export function escapeRegExp(value: string): string {
  return value.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
}

export function parseDockerfile(text: string): ParsedDockerfile {
  const lines = normalizeDockerfileText(text).split('\n');
  const directives: Record<string, string> = {};
  let index = 0;
  for (; index < lines.length; index++) {
    const match = DIRECTIVE.exec(lines[index]!);
    if (!match) break;
    const key = match[1]!.toLowerCase();
    if (!(key in directives)) directives[key] = match[2]!;
  }
  const escapeChar = directives.escape === '`' ? '`' : '\\';
  const continuation = new RegExp(`${escapeRegExp(escapeChar)}[ \\t]*$`);

  const instructions: DockerfileInstruction[] = [];
  let danglingContinuation = false;
  let unterminatedHeredoc: string | null = null;
  while (index < lines.length) {
    const first = lines[index]!;
    const trimmed = first.trimStart();
    if (trimmed === '' || trimmed.startsWith('#')) {
      index++;
      continue;
    }
    const startLine = index + 1;
    let logical = '';
    let line = first;
    for (;;) {
      if (!continuation.test(line)) {
        logical += line;
        break;
      }
      logical += line.replace(continuation, '');
      index++;
      // Blank and comment lines inside a continuation are skipped, as BuildKit does.
      while (index < lines.length && /^\s*(#.*)?$/.test(lines[index]!)) index++;
      if (index >= lines.length) {
        danglingContinuation = true;
        break;
      }
      line = lines[index]!;
    }
    let endLine = Math.min(index + 1, lines.length);
    index++;
    const body = logical.trimStart();
    const space = body.search(/\s/);
    const keyword = (space === -1 ? body : body.slice(0, space)).toUpperCase();
    const args = space === -1 ? '' : body.slice(space).trim();
    const heredocs: DockerfileHeredoc[] = [];
    const heredocHost = keyword === 'ONBUILD' ? (args.split(/\s/, 1)[0] ?? '').toUpperCase() : keyword;
    if (HEREDOC_KEYWORDS.has(heredocHost) && !args.startsWith('[')) {
      for (const { stripTabs, name } of heredocMarkers(args)) {
        const bodyLines: string[] = [];
        let terminated = false;
        while (index < lines.length) {
          const raw = lines[index]!;
          index++;
          if ((stripTabs ? raw.replace(/^\t+/, '') : raw) === name) {
            terminated = true;
            break;
          }
          bodyLines.push(stripTabs ? raw.replace(/^\t+/, '') : raw);
        }
        endLine = index;
        heredocs.push({ name, body: bodyLines.length > 0 ? `${bodyLines.join('\n')}\n` : '' });
        if (!terminated) {
          unterminatedHeredoc = name;
          break;
        }
      }
    }
    instructions.push({ keyword, args, heredocs, startLine, endLine });
  }
  return { directives, escapeChar, instructions, danglingContinuation, unterminatedHeredoc };
}

/** Splits instruction arguments into leading `--flag[=value]` options and the rest. */
export function splitFlags(args: string): {
  flags: Array<{ name: string; value: string | null }>;
  rest: string;
} {
  const flags: Array<{ name: string; value: string | null }> = [];
  let rest = args.trimStart();
  for (;;) {
    const match = /^--([A-Za-z][A-Za-z0-9-]*)(?:=(\S*))?(?:\s+|$)/.exec(rest);
    if (!match) break;
    flags.push({ name: match[1]!.toLowerCase(), value: match[2] ?? null });
    rest = rest.slice(match[0].length);
  }
  return { flags, rest };
}

/** Arguments in exec form (`["a", "b"]`) or whitespace-separated shell form. */
export function splitArguments(rest: string): string[] {
  const trimmed = rest.trim();
  if (trimmed.startsWith('[')) {
    try {
      const value: unknown = JSON.parse(trimmed);
      if (Array.isArray(value) && value.every((item) => typeof item === 'string')) return value;
    } catch {
      // Not JSON: Docker treats it as shell form too.
    }
  }
  return trimmed.split(/\s+/).filter((part) => part !== '');
}
