// A project's settings as a form: name, repository (any git URL or an absolute local path), the
// upstream credential (write-only: stored encrypted, never read back), the sandbox provider and the
// default branch. Creating reads the repository's manifest; a field the API refuses is marked.
import type { OperationResult } from '@urql/core';
import { useState } from 'react';
import { type ApiProblem, Problem, problemFromError } from './errors';
import type { Provider } from './generated/graphql';

export interface ProjectFields {
  name: string;
  repositoryUrl: string;
  gitCredential: string;
  provider: Provider | '';
  defaultBranch: string;
}

const PROVIDERS: { value: Provider | ''; label: string }[] = [
  { value: '', label: 'the server’s default' },
  { value: 'LOCAL', label: 'LOCAL (this host, no enforced limits)' },
  { value: 'DAYTONA', label: 'Daytona' },
  { value: 'E2B', label: 'E2B' },
  { value: 'PLATINUM', label: 'Platinum' },
];

/** What the API refused in a project form: the problem, the field at fault, the manifest's problems. */
export interface FormErrors {
  problem: ApiProblem | null;
  field: string | null;
  manifest: { field: string[]; message: string }[];
}

const NO_ERRORS: FormErrors = { problem: null, field: null, manifest: [] };

/** A project mutation's payload as ErrorFields and ManifestProblems read it (its success type has none). */
type FormPayload = {
  __typename: string;
  code?: string;
  message?: string;
  field?: string[] | null;
  problems?: { field: string[]; message: string }[];
};

/**
 * Runs a project mutation and keeps what it refused: `submit` returns the success payload, or null
 * after recording the error (network, GraphQL, or the payload's with its field and manifest problems).
 */
export function useProjectMutation() {
  const [errors, setErrors] = useState<FormErrors>(NO_ERRORS);
  async function submit<Data, P extends FormPayload, S extends P['__typename']>(
    pending: Promise<OperationResult<Data>>,
    payloadOf: (data: Data) => P | null | undefined,
    success: S,
  ): Promise<Extract<P, { __typename: S }> | null> {
    setErrors(NO_ERRORS);
    const result = await pending;
    if (result.error) {
      setErrors({ ...NO_ERRORS, problem: problemFromError(result.error) });
      return null;
    }
    const payload = result.data ? payloadOf(result.data) : null;
    if (payload?.__typename === success) return payload as Extract<P, { __typename: S }>;
    if (payload) {
      setErrors({
        problem: { message: payload.message ?? payload.__typename, code: payload.code ?? payload.__typename },
        field: payload.field?.at(-1) ?? null,
        manifest: payload.problems ?? [],
      });
    }
    return null;
  }
  return { errors, submit };
}

export const EMPTY_PROJECT: ProjectFields = {
  name: '',
  repositoryUrl: '',
  gitCredential: '',
  provider: '',
  defaultBranch: '',
};

export function ProjectForm({
  id,
  initial,
  submitLabel,
  busy,
  errors,
  hasCredential,
  onSubmit,
}: {
  id: string;
  initial: ProjectFields;
  submitLabel: string;
  busy: boolean;
  errors: FormErrors;
  hasCredential?: boolean;
  onSubmit(fields: ProjectFields): Promise<boolean>;
}) {
  const [fields, setFields] = useState(initial);
  const set = (name: keyof ProjectFields) => (e: { target: { value: string } }) =>
    setFields((f) => ({ ...f, [name]: e.target.value }));
  const invalid = (name: keyof ProjectFields) => (errors.field === name ? true : undefined);

  async function submit(event: { preventDefault(): void }) {
    event.preventDefault();
    if (await onSubmit(fields)) setFields((f) => ({ ...f, gitCredential: '' }));
  }

  return (
    <form className="create" id={id} onSubmit={submit}>
      <label>
        Project name
        <input
          name="name"
          required
          value={fields.name}
          onChange={set('name')}
          aria-invalid={invalid('name')}
        />
      </label>
      <label className="wide">
        Repository URL or local path
        <input
          name="repositoryUrl"
          required
          className="mono"
          placeholder="https://github.com/acme/app.git or /srv/git/app"
          value={fields.repositoryUrl}
          onChange={set('repositoryUrl')}
          aria-invalid={invalid('repositoryUrl')}
        />
      </label>
      <label>
        Git credential (write-only)
        <input
          name="gitCredential"
          type="password"
          autoComplete="off"
          placeholder={hasCredential ? 'stored: leave empty to keep' : 'token, for private repositories'}
          value={fields.gitCredential}
          onChange={set('gitCredential')}
          aria-invalid={invalid('gitCredential')}
        />
      </label>
      <label>
        Provider
        <select
          name="provider"
          value={fields.provider}
          onChange={set('provider')}
          aria-invalid={invalid('provider')}
        >
          {PROVIDERS.map((p) => (
            <option key={p.value} value={p.value}>
              {p.label}
            </option>
          ))}
        </select>
      </label>
      <label>
        Default branch
        <input
          name="defaultBranch"
          className="mono"
          placeholder="main"
          value={fields.defaultBranch}
          onChange={set('defaultBranch')}
          aria-invalid={invalid('defaultBranch')}
        />
      </label>
      <button
        type="submit"
        disabled={busy || fields.name.trim() === '' || fields.repositoryUrl.trim() === ''}
      >
        {submitLabel}
      </button>
      <div className="wide">
        <Problem problem={errors.problem} />
        {errors.manifest.length > 0 && (
          <ul className="problem" aria-label="Manifest problems" data-testid="manifest-problems">
            {errors.manifest.map((p) => (
              <li key={`${p.field.join('.')}:${p.message}`}>
                <span className="mono">{p.field.join('.')}</span>: {p.message}
              </li>
            ))}
          </ul>
        )}
      </div>
    </form>
  );
}
