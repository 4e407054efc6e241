// The session branch's files, read-only: one directory at a time from the server's git mirror (also
// after the session stopped), a file's text beside its path.
import { useState } from 'react';
import { useQuery } from 'urql';
import { Problem, problemFromError } from './errors';
import { SessionFileDocument, SessionTreeDocument } from './generated/graphql';

export function Files({ sessionId }: { sessionId: string }) {
  const [dir, setDir] = useState('');
  const [file, setFile] = useState<string | null>(null);
  const [tree] = useQuery({ query: SessionTreeDocument, variables: { id: sessionId, path: dir } });
  const entries = tree.data?.session?.tree;
  const parts = dir ? dir.split('/') : [];
  return (
    <section aria-labelledby="files-title" data-testid="files">
      <h2 id="files-title">Files</h2>
      <nav aria-label="Folder" className="crumbs">
        <button type="button" className="link" onClick={() => setDir('')}>
          (root)
        </button>
        {parts.map((name, i) => (
          <span key={parts.slice(0, i + 1).join('/')}>
            {' / '}
            <button type="button" className="link" onClick={() => setDir(parts.slice(0, i + 1).join('/'))}>
              {name}
            </button>
          </span>
        ))}
      </nav>
      {tree.error && <Problem problem={problemFromError(tree.error)} />}
      {tree.data && !entries && (
        <p className="empty">
          Nothing to list: the branch is not in the repository yet, or this folder is gone from it.{' '}
          <button type="button" className="link" onClick={() => setDir('')}>
            Back to the root
          </button>
        </p>
      )}
      <ul className="plain tree" data-testid="tree">
        {entries?.map((e) => (
          <li key={e.path} data-entry={e.path} data-type={e.type}>
            {e.type === 'DIRECTORY' ? (
              <button type="button" className="link" onClick={() => setDir(e.path)}>
                {e.name}/
              </button>
            ) : e.type === 'FILE' ? (
              <button
                type="button"
                className="link"
                aria-pressed={file === e.path}
                onClick={() => setFile(e.path)}
              >
                {e.name}
              </button>
            ) : (
              <span>
                {e.name} <span className="muted">({e.type.toLowerCase()})</span>
              </span>
            )}
            {e.sizeBytes !== null && <span className="muted"> {formatBytes(e.sizeBytes)}</span>}
          </li>
        ))}
      </ul>
      {entries && entries.length === 0 && <p className="empty">This folder is empty.</p>}
      {file && <FileView sessionId={sessionId} path={file} />}
    </section>
  );
}

function FileView({ sessionId, path }: { sessionId: string; path: string }) {
  const [result] = useQuery({ query: SessionFileDocument, variables: { id: sessionId, path } });
  const file = result.data?.session?.file;
  return (
    <figure className="file-view" data-testid="file-view" data-path={path}>
      <figcaption className="mono">
        {path}
        {file && ` · ${formatBytes(file.sizeBytes)} at ${file.commit.slice(0, 8)}`}
      </figcaption>
      {result.error && <Problem problem={problemFromError(result.error)} />}
      {result.data && !file && <p className="empty">The branch no longer has this file.</p>}
      {file?.binary && <p className="muted">A binary file: not shown.</p>}
      {file?.text != null && <pre className="log">{file.text}</pre>}
      {file?.truncated && <p className="warning">Cut at 1 MiB; the branch has the rest.</p>}
    </figure>
  );
}

function formatBytes(bytes: number): string {
  if (bytes < 1024) return `${bytes} B`;
  if (bytes < 1024 * 1024) return `${(bytes / 1024).toFixed(1)} KiB`;
  return `${(bytes / 1024 / 1024).toFixed(1)} MiB`;
}
