// The session branch's diff against the commit it was cut from, per file and unified, read from the
// server's git mirror: it shows the same before and after the session stops.
import { useQuery } from 'urql';
import { Problem, problemFromError } from './errors';
import { RefreshButton } from './RefreshButton';
import { type FileChangeFieldsFragment, SessionChangesDocument } from './generated/graphql';
import { Diff } from './ToolCall';

export function Changes({ sessionId }: { sessionId: string }) {
  const [result, refetch] = useQuery({ query: SessionChangesDocument, variables: { id: sessionId } });
  const session = result.data?.session;
  const changes = session?.changes;
  return (
    <section aria-labelledby="changes-title" data-testid="changes">
      <div className="section-head">
        <h2 id="changes-title">Changes</h2>
        <RefreshButton fetching={result.fetching} refetch={refetch} busyLabel="Reading…" />
      </div>
      {result.error && <Problem problem={problemFromError(result.error)} />}
      {session && !changes && (
        <p className="empty">
          The session’s branch is not in the repository yet. It appears once the sandbox pushes it; refresh
          then.
        </p>
      )}
      {changes && changes.files.length === 0 && (
        <p className="empty" data-testid="no-changes">
          No changes yet: the branch matches <span className="mono">{session.baseRef}</span> (
          {changes.baseCommit.slice(0, 8)}). Commits the agent makes show here.
        </p>
      )}
      {changes && changes.files.length > 0 && (
        <>
          <p data-testid="changes-summary">
            {changes.files.length} file{changes.files.length === 1 ? '' : 's'} changed,{' '}
            <span className="added">+{changes.additions}</span>{' '}
            <span className="removed">−{changes.deletions}</span> against{' '}
            <span className="mono">{session.baseRef}</span> ({changes.baseCommit.slice(0, 8)} →{' '}
            {changes.headCommit.slice(0, 8)})
          </p>
          {changes.files.map((file) => (
            <FileDiff key={file.path} file={file} />
          ))}
        </>
      )}
    </section>
  );
}

function FileDiff({ file }: { file: FileChangeFieldsFragment }) {
  const lines = file.patch ? patchBody(file.patch) : null;
  return (
    <details className="file-diff" open data-file={file.path} data-status={file.status}>
      <summary>
        <span className="mono">{file.previousPath ? `${file.previousPath} → ${file.path}` : file.path}</span>{' '}
        <span className="muted">{file.status.toLowerCase().replace('_', ' ')}</span>{' '}
        <span className="added">+{file.additions}</span> <span className="removed">−{file.deletions}</span>
      </summary>
      {file.binary && <p className="muted">A binary file: no text diff.</p>}
      {lines && <Diff lines={lines} label={`Diff of ${file.path}`} />}
      {file.patchTruncated && (
        <p className="warning">The diff is cut here (too large to show whole); the branch has the rest.</p>
      )}
    </details>
  );
}

/** A file's patch without git's header lines (diff --git, index, ---/+++): the hunks. */
export function patchBody(patch: string): string[] {
  const lines = patch.replace(/\n$/, '').split('\n');
  const first = lines.findIndex((l) => l.startsWith('@@'));
  return first === -1 ? lines : lines.slice(first);
}
