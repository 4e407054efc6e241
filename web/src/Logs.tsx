// The end of the sandbox entry process's output (`Sandbox.logTail`): live while the sandbox runs
// (read again every few seconds while this tab is open), the copy kept at stop or failure after.
import { useEffect } from 'react';
import { useQuery } from 'urql';
import { Problem, problemFromError } from './errors';
import { RefreshButton } from './RefreshButton';
import { SandboxLogsDocument } from './generated/graphql';

const POLL_MS = 5_000;

export function Logs({ sandboxId, live }: { sandboxId: string; live: boolean }) {
  const [result, refetch] = useQuery({
    query: SandboxLogsDocument,
    variables: { id: sandboxId },
    requestPolicy: 'network-only',
  });
  useEffect(() => {
    if (!live) return;
    const timer = setInterval(() => refetch({ requestPolicy: 'network-only' }), POLL_MS);
    return () => clearInterval(timer);
  }, [live, refetch]);
  const tail = result.data?.sandbox?.logTail;
  return (
    <section aria-labelledby="logs-title" data-testid="logs">
      <div className="section-head">
        <h2 id="logs-title">Logs</h2>
        <RefreshButton fetching={result.fetching} refetch={refetch} />
      </div>
      {result.error && <Problem problem={problemFromError(result.error)} />}
      <p className="muted">
        The end of the sandbox’s entry log (the daemon and OpenCode){live ? ', read again every 5 s' : ''}.
      </p>
      {result.data &&
        (tail ? (
          <pre className="log" data-testid="log-tail">
            {tail}
          </pre>
        ) : (
          <p className="empty">
            No log to show: the sandbox has not written one, or its provider kept none after it stopped.
          </p>
        ))}
    </section>
  );
}
