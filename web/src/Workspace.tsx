// The session's workspace beside the conversation, in tabs: Changes (the branch's diff against its
// base and the change request), Files (the branch's tree, read-only), Terminal (a shell in the
// sandbox, for those who may write), Preview (picked from the sandbox's listening ports), Telemetry
// and Logs. Changes and Files come from the server's git mirror, so they outlive the sandbox.
import { useEffect } from 'react';
import { useQuery } from 'urql';
import { ChangeRequestPanel } from './ChangeRequest';
import { Changes } from './Changes';
import { Files } from './Files';
import { SandboxPortsDocument, type SessionHeaderFragment } from './generated/graphql';
import { Logs } from './Logs';
import { Preview } from './Preview';
import { Tabs } from './Tabs';
import { Telemetry } from './Telemetry';
import { Terminal } from './Terminal';

/** How often the preview tab reads the ports again: the daemon reports a change within seconds. */
const PORTS_POLL_MS = 3_000;

export function Workspace({ session }: { session: SessionHeaderFragment }) {
  const running = session.status === 'RUNNING';
  const sandboxId = session.sandbox?.id ?? null;
  const noSandbox = (what: string) => (
    <p className="empty">
      {what} needs the session’s sandbox, and this session has none ({session.status.toLowerCase()}). Its
      conversation, changes and files stay readable.
    </p>
  );
  return (
    <section className="card workspace" aria-label="Workspace">
      <Tabs
        label="Workspace"
        tabs={[
          {
            id: 'changes',
            label: 'Changes',
            render: () => (
              <>
                <Changes sessionId={session.sessionId} />
                <ChangeRequestPanel
                  sessionId={session.sessionId}
                  branchName={session.branchName}
                  projectId={session.project.id}
                />
              </>
            ),
          },
          { id: 'files', label: 'Files', render: () => <Files sessionId={session.sessionId} /> },
          {
            id: 'terminal',
            label: 'Terminal',
            render: () => <Terminal sessionId={session.sessionId} live={running} />,
          },
          {
            id: 'preview',
            label: 'Preview',
            render: () =>
              sandboxId ? <PreviewTab sandboxId={sandboxId} live={running} /> : noSandbox('A preview'),
          },
          {
            id: 'telemetry',
            label: 'Telemetry',
            render: () => (sandboxId ? <Telemetry sandboxId={sandboxId} /> : noSandbox('Telemetry')),
          },
          {
            id: 'logs',
            label: 'Logs',
            render: () => (sandboxId ? <Logs sandboxId={sandboxId} live={running} /> : noSandbox('The log')),
          },
        ]}
      />
    </section>
  );
}

function PreviewTab({ sandboxId, live }: { sandboxId: string; live: boolean }) {
  const [ports, refetch] = useQuery({
    query: SandboxPortsDocument,
    variables: { id: sandboxId },
    requestPolicy: 'network-only',
  });
  useEffect(() => {
    if (!live) return;
    const timer = setInterval(() => refetch({ requestPolicy: 'network-only' }), PORTS_POLL_MS);
    return () => clearInterval(timer);
  }, [live, refetch]);
  const sandbox = ports.data?.sandbox;
  // Before the daemon's first report the ports are unknown, not "none".
  const known = sandbox?.portsReportedAt ? sandbox.ports : null;
  return <Preview sandboxId={sandboxId} live={live} ports={known} />;
}
