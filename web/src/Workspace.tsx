// The session's workspace beside the conversation, in tabs: Changes (the branch's diff against its
// base and the change request), Files (the branch's tree, read-only), Terminal (a shell in the
// sandbox, for those who may write), Preview (the sandbox's listening ports), Telemetry and Logs.
import { ChangeRequestPanel } from './ChangeRequest';
import type { SessionHeaderFragment } from './generated/graphql';
import { Preview } from './Preview';
import { Tabs } from './Tabs';
import { Telemetry } from './Telemetry';
import { Terminal } from './Terminal';

export function Workspace({ session }: { session: SessionHeaderFragment }) {
  const running = session.status === 'RUNNING';
  const sandboxId = session.sandbox?.id ?? null;
  const noSandbox = (what: string) => (
    <p className="empty">
      {what} needs the session’s sandbox, and this session has none ({session.status.toLowerCase()}).
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
              <ChangeRequestPanel
                sessionId={session.sessionId}
                branchName={session.branchName}
                projectId={session.project.id}
              />
            ),
          },
          {
            id: 'terminal',
            label: 'Terminal',
            render: () => <Terminal sessionId={session.sessionId} live={running} />,
          },
          {
            id: 'preview',
            label: 'Preview',
            render: () =>
              sandboxId ? <Preview sandboxId={sandboxId} live={running} /> : noSandbox('A preview'),
          },
          {
            id: 'telemetry',
            label: 'Telemetry',
            render: () => (sandboxId ? <Telemetry sandboxId={sandboxId} /> : noSandbox('Telemetry')),
          },
        ]}
      />
    </section>
  );
}
