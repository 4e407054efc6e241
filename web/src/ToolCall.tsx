// A tool call as a terminal block: the command (or the tool and what it was given), its status and
// duration, its output folded past a few lines, an error highlighted; a file edit shows its diff.
import { useState } from 'react';

/** What the transcript knows of a tool part (stored or streamed). */
export interface ToolPart {
  id: string;
  tool?: string | null;
  toolInput?: string | null;
  toolOutput?: string | null;
  toolStatus?: string | null;
  toolError?: string | null;
  title?: string | null;
  startedAt?: string | null;
  endedAt?: string | null;
  /** The output was cut (the record keeps a bounded amount); its last line says how much. */
  outputTruncated?: boolean | null;
}

/** Output lines shown before the rest is folded away. */
export const FOLDED_LINES = 8;

function parseInput(json: string | null | undefined): Record<string, unknown> {
  if (!json) return {};
  try {
    const value = JSON.parse(json) as unknown;
    return value && typeof value === 'object' && !Array.isArray(value)
      ? (value as Record<string, unknown>)
      : {};
  } catch {
    return {};
  }
}

const str = (value: unknown): string | null => (typeof value === 'string' ? value : null);

/** The line a person would have typed: bash's command, else the tool with its main argument. */
export function commandLine(tool: string, input: Record<string, unknown>): string {
  const command = str(input.command);
  if (command) return command;
  const target =
    str(input.filePath) ?? str(input.path) ?? str(input.pattern) ?? str(input.url) ?? str(input.description);
  return target ? `${tool} ${target}` : tool;
}

export function formatDuration(ms: number): string {
  if (ms < 1_000) return `${Math.round(ms)} ms`;
  if (ms < 60_000) return `${(ms / 1_000).toFixed(1)} s`;
  return `${Math.floor(ms / 60_000)} min ${Math.round((ms % 60_000) / 1_000)} s`;
}

/** An edit's change as unified lines: what was replaced, then what replaced it; a write is all new. */
export function editDiff(tool: string, input: Record<string, unknown>): string[] | null {
  const oldString = str(input.oldString);
  const newString = str(input.newString);
  if (tool === 'edit' && newString !== null) {
    return [
      ...(oldString ? oldString.split('\n').map((l) => `-${l}`) : []),
      ...newString.split('\n').map((l) => `+${l}`),
    ];
  }
  const content = str(input.content);
  if (tool === 'write' && content !== null)
    return content
      .replace(/\n$/, '')
      .split('\n')
      .map((l) => `+${l}`);
  return null;
}

export function ToolCall({ part }: { part: ToolPart }) {
  const tool = part.tool ?? 'tool';
  const input = parseInput(part.toolInput);
  const status = part.toolStatus ?? 'pending';
  const failed = status === 'error';
  const duration =
    part.startedAt && part.endedAt ? Date.parse(part.endedAt) - Date.parse(part.startedAt) : null;
  const diff = editDiff(tool, input);
  return (
    <div className={`tool-call ${status}`} data-tool={tool} data-status={status} data-part={part.id}>
      <div className="tool-head">
        <code className="tool-command">
          <span aria-hidden="true">$ </span>
          {commandLine(tool, input)}
        </code>
        <span className="tool-status" data-testid="tool-status">
          {status}
          {duration !== null && Number.isFinite(duration) && ` · ${formatDuration(duration)}`}
        </span>
      </div>
      {part.title && part.title !== commandLine(tool, input) && (
        <div className="tool-title">{part.title}</div>
      )}
      {diff && <Diff lines={diff} label={`Change to ${str(input.filePath) ?? 'the file'}`} />}
      {part.toolOutput && !diff && <Output text={part.toolOutput} />}
      {part.outputTruncated && (
        <div className="tool-title">The output was cut; its last line says how much.</div>
      )}
      {failed && (
        <div className="tool-error" role="note">
          {part.toolError ?? 'The tool failed without saying why.'}
        </div>
      )}
    </div>
  );
}

function Output({ text }: { text: string }) {
  const [open, setOpen] = useState(false);
  const lines = text.replace(/\n$/, '').split('\n');
  const folded = lines.length > FOLDED_LINES && !open;
  return (
    <>
      <pre className="tool-output" data-testid="tool-output" data-folded={folded}>
        {folded ? lines.slice(0, FOLDED_LINES).join('\n') : lines.join('\n')}
      </pre>
      {lines.length > FOLDED_LINES && (
        <button type="button" className="link" onClick={() => setOpen(!open)} aria-expanded={open}>
          {open ? 'Show less' : `Show all ${lines.length} lines`}
        </button>
      )}
    </>
  );
}

/** Unified diff lines (`+`, `-`, ` `, `@@`), coloured by their first character. */
export function Diff({ lines, label }: { lines: string[]; label: string }) {
  return (
    <figure className="diff">
      <figcaption className="visually-hidden">{label}</figcaption>
      <pre className="diff">
        {lines.map((line, i) => (
          <span
            // Lines repeat; their place is their identity.
            // biome-ignore lint/suspicious/noArrayIndexKey: see above
            key={i}
            className={
              line.startsWith('+')
                ? 'add'
                : line.startsWith('-')
                  ? 'del'
                  : line.startsWith('@@')
                    ? 'hunk'
                    : undefined
            }
          >
            {line}
            {'\n'}
          </span>
        ))}
      </pre>
    </figure>
  );
}
