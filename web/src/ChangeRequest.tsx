// The session's change request: open one for the session branch (title, description), then its
// status and diff statistics against the default branch, merge it (merge commit, squash or
// fast-forward) or close it. A refused merge shows its message and code, and a conflict its paths.
import { useState } from 'react';
import { useMutation, useQuery } from 'urql';
import { type ApiProblem, Problem, problemFromError, problemFromPayload } from './errors';
import {
  type ChangeRequestFieldsFragment,
  CloseChangeRequestDocument,
  MergeChangeRequestDocument,
  type MergeMethod,
  OpenChangeRequestDocument,
  SessionChangeRequestsDocument,
} from './generated/graphql';
import { StatusBadge } from './status';

const METHODS: { value: MergeMethod; label: string }[] = [
  { value: 'MERGE', label: 'merge commit' },
  { value: 'SQUASH', label: 'squash' },
  { value: 'FAST_FORWARD', label: 'fast-forward' },
];

export function ChangeRequestPanel({
  sessionId,
  branchName,
  projectId,
}: {
  sessionId: string;
  branchName: string;
  projectId: string;
}) {
  const [list, refetch] = useQuery({ query: SessionChangeRequestsDocument, variables: { projectId } });
  const [opening, open] = useMutation(OpenChangeRequestDocument);
  const [merging, merge] = useMutation(MergeChangeRequestDocument);
  const [closing, close] = useMutation(CloseChangeRequestDocument);
  const [changed, setChanged] = useState<ChangeRequestFieldsFragment | null>(null);
  const [title, setTitle] = useState('');
  const [description, setDescription] = useState('');
  const [method, setMethod] = useState<MergeMethod>('MERGE');
  const [problem, setProblem] = useState<ApiProblem | null>(null);
  const [conflicts, setConflicts] = useState<string[]>([]);

  // The project's change requests of this session's branch, newest first; a mutation's answer is
  // newer than the list until the list is read again.
  const ours = (list.data?.project?.changeRequests.edges.map((edge) => edge.node) ?? [])
    .filter((cr) => cr.headRef === branchName)
    .sort((a, b) => b.createdAt.localeCompare(a.createdAt));
  const current = newer(changed, ours[0] ?? null);

  const refresh = () => refetch({ requestPolicy: 'network-only' });
  const fail = (next: ApiProblem, paths: readonly string[] = []) => {
    setProblem(next);
    setConflicts([...paths]);
  };
  const succeed = (cr: ChangeRequestFieldsFragment) => {
    setProblem(null);
    setConflicts([]);
    setChanged(cr);
    refresh();
  };

  async function onOpen(event: { preventDefault(): void }) {
    event.preventDefault();
    const result = await open({
      input: {
        sessionId,
        title: title.trim(),
        ...(description.trim() ? { description: description.trim() } : {}),
      },
    });
    if (result.error) return fail(problemFromError(result.error));
    const payload = result.data?.openChangeRequest;
    if (payload?.__typename === 'OpenChangeRequestSuccess') {
      setTitle('');
      setDescription('');
      succeed(payload.changeRequest);
    } else if (payload) fail(problemFromPayload(payload));
  }

  async function onMerge(cr: ChangeRequestFieldsFragment) {
    const result = await merge({ input: { changeRequestId: cr.id, method } });
    if (result.error) return fail(problemFromError(result.error));
    const payload = result.data?.mergeChangeRequest;
    if (payload?.__typename === 'MergeChangeRequestSuccess') succeed(payload.changeRequest);
    else if (payload) {
      fail(problemFromPayload(payload), payload.__typename === 'MergeConflictError' ? payload.conflicts : []);
      // A refused merge records what it found (mergeable, conflicts): read it back.
      setChanged(null);
      refresh();
    }
  }

  async function onClose(cr: ChangeRequestFieldsFragment) {
    const result = await close({ input: { changeRequestId: cr.id } });
    if (result.error) return fail(problemFromError(result.error));
    const payload = result.data?.closeChangeRequest;
    if (payload?.__typename === 'CloseChangeRequestSuccess') succeed(payload.changeRequest);
    else if (payload) fail(problemFromPayload(payload));
  }

  const busy = opening.fetching || merging.fetching || closing.fetching;
  return (
    <section className="card" aria-labelledby="change-request-title" data-testid="change-request">
      <h2 id="change-request-title">Change request</h2>
      {list.error && <Problem problem={problemFromError(list.error)} />}
      {current && (
        <div data-status={current.status} data-change-request={current.id}>
          <p>
            <strong>{current.title}</strong> <StatusBadge status={current.status} />
          </p>
          <p data-testid="diff-stats">
            {current.filesChanged} file(s) changed, <span className="added">+{current.additions}</span>{' '}
            <span className="removed">−{current.deletions}</span> ·{' '}
            <span className="mono">{current.headRef.slice(0, 8)}</span> ({current.headCommit.slice(0, 8)})
            into <span className="mono">{current.baseRef}</span> ({current.baseCommit.slice(0, 8)})
          </p>
          {current.status === 'OPEN' && (
            <p data-testid="mergeable">
              {current.mergeable
                ? 'Merges cleanly as of the last check.'
                : `Conflicts as of the last check: ${current.conflicts.join(', ')}`}
            </p>
          )}
          {current.status === 'MERGED' && (
            <p>
              Merged ({current.mergeMethod?.toLowerCase().replace('_', '-')}) as{' '}
              <span className="mono" data-testid="merge-commit">
                {current.mergeCommit}
              </span>{' '}
              on {new Date(current.mergedAt ?? '').toLocaleString()}.
            </p>
          )}
          {current.status === 'CLOSED' && (
            <p>Closed on {new Date(current.closedAt ?? '').toLocaleString()}.</p>
          )}
          {current.status === 'OPEN' && (
            <div className="composer">
              <label>
                Merge method{' '}
                <select value={method} onChange={(e) => setMethod(e.target.value as MergeMethod)}>
                  {METHODS.map((m) => (
                    <option key={m.value} value={m.value}>
                      {m.label}
                    </option>
                  ))}
                </select>
              </label>
              <button type="button" disabled={busy} onClick={() => void onMerge(current)}>
                Merge
              </button>
              <button
                type="button"
                className="secondary"
                disabled={busy}
                onClick={() => void onClose(current)}
              >
                Close change request
              </button>
            </div>
          )}
        </div>
      )}
      {current?.status !== 'OPEN' && (
        <form className="create" onSubmit={onOpen}>
          <label>
            Title
            <input
              name="changeRequestTitle"
              required
              value={title}
              onChange={(e) => setTitle(e.target.value)}
            />
          </label>
          <label className="wide">
            Description
            <textarea
              name="changeRequestDescription"
              rows={2}
              value={description}
              onChange={(e) => setDescription(e.target.value)}
            />
          </label>
          <button type="submit" disabled={busy || title.trim() === ''}>
            Open change request
          </button>
        </form>
      )}
      <Problem problem={problem} />
      {conflicts.length > 0 && (
        <ul aria-label="Conflicting paths" data-testid="conflicts">
          {conflicts.map((path) => (
            <li key={path} className="mono">
              {path}
            </li>
          ))}
        </ul>
      )}
    </section>
  );
}

function newer(
  a: ChangeRequestFieldsFragment | null,
  b: ChangeRequestFieldsFragment | null,
): ChangeRequestFieldsFragment | null {
  if (!a || !b) return a ?? b;
  if (a.id === b.id) return a.updatedAt >= b.updatedAt ? a : b;
  return a.createdAt >= b.createdAt ? a : b;
}
