// A project's settings as a form: name, repository (any git URL or an absolute local path), the
// upstream credential (write-only: stored encrypted, never read back), the sandbox provider and the
// default branch. Creating reads the repository's manifest; a field the API refuses is marked.
import { useState } from 'react';
import { Problem } from './errors';
import type { ApiProblem } from './errors';
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
  problem,
  /** The input field the API refused (ValidationError.field[0]). */
  invalidField,
  hasCredential,
  onSubmit,
}: {
  id: string;
  initial: ProjectFields;
  submitLabel: string;
  busy: boolean;
  problem: ApiProblem | null;
  invalidField?: string | null;
  hasCredential?: boolean;
  onSubmit(fields: ProjectFields): Promise<boolean>;
}) {
  const [fields, setFields] = useState(initial);
  const set = (name: keyof ProjectFields) => (e: { target: { value: string } }) =>
    setFields((f) => ({ ...f, [name]: e.target.value }));
  const invalid = (name: keyof ProjectFields) => (invalidField === name ? true : undefined);

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
        <Problem problem={problem} />
      </div>
    </form>
  );
}
