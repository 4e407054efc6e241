// The daemon's input checks (environment, flags, control-route bodies) without a schema library:
// zod alone added ~15 MiB of resident memory and ~75 ms of module load to the bundled daemon. The
// shapes here are the few the daemon needs; the issues carry zod 4's messages and `prettify` prints
// them as `z.prettifyError` does, so error texts stay as they were (test/agent/units.test.ts
// compares them with zod's).

export interface Issue {
  path: string[];
  message: string;
}

interface Base {
  optional?: boolean;
}
export type Field =
  | (Base & { type: 'string'; min?: number; max?: number; pattern?: RegExp; patternMessage?: string })
  | (Base & { type: 'url' })
  | (Base & { type: 'boolean' })
  | (Base & { type: 'enum'; values: readonly string[]; default?: string })
  /** `z.coerce.number()`: Number(value), then the checks. */
  | (Base & { type: 'number'; int?: boolean; min?: number; gt?: number; max?: number; default?: number });

export type Shape = Record<string, Field>;

export type ParseResult =
  | { success: true; data: Record<string, unknown> }
  | { success: false; issues: Issue[] };

/** zod's name for a value's type in "expected …, received …". */
function received(value: unknown): string {
  if (typeof value === 'number') return Number.isNaN(value) ? 'NaN' : 'number';
  if (Array.isArray(value)) return 'array';
  if (value === null) return 'null';
  return typeof value;
}

function invalidType(expected: string, value: unknown): string {
  return `Invalid input: expected ${expected}, received ${received(value)}`;
}

/** The field's value, or issues. `undefined` input means the key is absent. */
function field(spec: Field, input: unknown, issues: string[]): unknown {
  if (input === undefined) {
    if ('default' in spec && spec.default !== undefined) return spec.default;
    if (spec.optional) return undefined;
  }
  switch (spec.type) {
    case 'string': {
      if (typeof input !== 'string') {
        issues.push(invalidType('string', input));
        return undefined;
      }
      if (spec.min !== undefined && input.length < spec.min)
        issues.push(`Too small: expected string to have >=${spec.min} characters`);
      if (spec.max !== undefined && input.length > spec.max)
        issues.push(`Too big: expected string to have <=${spec.max} characters`);
      if (spec.pattern && !spec.pattern.test(input)) issues.push(spec.patternMessage ?? 'Invalid string');
      return input;
    }
    case 'url': {
      if (typeof input !== 'string') {
        issues.push(invalidType('string', input));
        return undefined;
      }
      const trimmed = input.trim();
      try {
        new URL(trimmed);
      } catch {
        issues.push('Invalid URL');
      }
      return trimmed;
    }
    case 'boolean':
      if (typeof input !== 'boolean') issues.push(invalidType('boolean', input));
      return input;
    case 'enum':
      if (typeof input !== 'string' || !spec.values.includes(input)) {
        issues.push(`Invalid option: expected one of ${spec.values.map((v) => JSON.stringify(v)).join('|')}`);
      }
      return input;
    case 'number': {
      const value = Number(input);
      if (Number.isNaN(value)) {
        issues.push(invalidType('number', value));
        return undefined;
      }
      if (!Number.isFinite(value)) {
        issues.push(`Invalid input: expected number, received ${value > 0 ? 'Infinity' : '-Infinity'}`);
        return undefined;
      }
      if (spec.int && !Number.isInteger(value)) {
        issues.push('Invalid input: expected int, received number');
        return undefined;
      }
      if (spec.gt !== undefined && !(value > spec.gt))
        issues.push(`Too small: expected number to be >${spec.gt}`);
      if (spec.min !== undefined && value < spec.min)
        issues.push(`Too small: expected number to be >=${spec.min}`);
      if (spec.max !== undefined && value > spec.max)
        issues.push(`Too big: expected number to be <=${spec.max}`);
      return value;
    }
  }
}

/** `z.object(shape).safeParse(input)`: known keys only, every problem reported. */
export function parseObject(shape: Shape, input: unknown): ParseResult {
  if (typeof input !== 'object' || input === null || Array.isArray(input)) {
    return { success: false, issues: [{ path: [], message: invalidType('object', input) }] };
  }
  const given = input as Record<string, unknown>;
  const data: Record<string, unknown> = {};
  const issues: Issue[] = [];
  for (const [key, spec] of Object.entries(shape)) {
    const messages: string[] = [];
    const value = field(spec, given[key], messages);
    for (const message of messages) issues.push({ path: [key], message });
    if (value !== undefined) data[key] = value;
  }
  return issues.length > 0 ? { success: false, issues } : { success: true, data };
}

/** `z.prettifyError`'s text for these (flat) issues. */
export function prettify(issues: Issue[]): string {
  return [...issues]
    .sort((a, b) => a.path.length - b.path.length)
    .map((issue) => `✖ ${issue.message}${issue.path.length > 0 ? `\n  → at ${issue.path.join('.')}` : ''}`)
    .join('\n');
}
