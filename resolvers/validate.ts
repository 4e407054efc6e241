// Small input validators shared by services; each failure names its input field.
import { ValidationError } from './errors';
import { refNameProblem } from './git/refs';

/** PostgreSQL text cannot hold NUL: refuse it as the caller's error before it reaches a query. */
export function requireNoNul(value: string, field: string[]): string {
  if (value.includes('\0'))
    throw new ValidationError(`${field.at(-1)} must not contain NUL characters.`, field);
  return value;
}

export function requireText(
  value: string,
  field: string[],
  options: { min?: number; max: number; pattern?: RegExp; hint?: string },
): string {
  const trimmed = requireNoNul(value.trim(), field);
  const min = options.min ?? 1;
  if (trimmed.length < min || trimmed.length > options.max) {
    throw new ValidationError(`${field.at(-1)} must be ${min} to ${options.max} characters.`, field);
  }
  if (options.pattern && !options.pattern.test(trimmed)) {
    throw new ValidationError(options.hint ?? `${field.at(-1)} has an invalid format.`, field);
  }
  return trimmed;
}

/** A git ref name as `git check-ref-format` would accept it (branch, tag or full ref), or a commit sha. */
export function requireRefName(value: string, field: string[]): string {
  const problem = refNameProblem(value);
  if (problem)
    throw new ValidationError(`${field.at(-1)} ${problem}; give a branch, tag or commit sha.`, field);
  return value;
}
