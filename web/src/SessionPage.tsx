// One session: the header (status, agent state, lease, reload phases as the server confirms each),
// the conversation (sendMessage, streamed over sessionEvents, abortTurn; tool calls as blocks) on one
// side and the workspace in tabs beside it (Workspace.tsx), Sync Branch & Reload and stop.
import { useCallback, useEffect, useMemo, useRef, useState } from 'react';
import { useMutation, useQuery, useSubscription } from 'urql';
import { useOnConnected } from './api-context';
import { type ApiProblem, Problem, problemFromError, problemFromPayload } from './errors';
import {
  AbortTurnDocument,
  type ReloadFieldsFragment,
  ReloadProgressDocument,
  ReloadSessionDocument,
  SendMessageDocument,
  type SessionEventsSubscription,
  SessionEventsDocument,
  type SessionHeaderFragment,
  type PartFieldsFragment,
  SessionMessagesDocument,
  SessionPageDocument,
  SessionUpdatedDocument,
  StopSessionDocument,
} from './generated/graphql';
import { linkProps } from './router';
import { StatusBadge, agentLabel, formatUsd } from './status';
import { CommandPalette } from './CommandPalette';
import { Workspace } from './Workspace';
import { ToolCall } from './ToolCall';

type AgentEvent = SessionEventsSubscription['sessionEvents'];

const MAX_EVENTS = 5_000;

/**
 * What Sync Branch & Reload asks of the agent: the reconcile instruction of the runtime reference
 * ("Reconcile a session branch"). The reference has the agent finish with `singulacomp sessions
 * reload --no-repo --force --yes`; here the dashboard starts that reload itself once the turn ends
 * (a web reload never refreshes the repository), so the agent is told to end its turn instead: a
 * reload during the turn would end it before the reconciliation is committed.
 */
export function syncInstruction(baseRef: string): string {
  return [
    `Sync Branch & Reload: the base branch ${baseRef} changed.`,
    `Inspect the session branch, preserve local work, fetch the latest ${baseRef}, resolve conflicts, run the relevant tests, and commit the reconciliation.`,
    'Do not resolve a conflict by taking one side wholesale, and do not reset the working tree.',
    'Do not reload the runtime yourself: end your turn when the reconciliation is committed, and the dashboard reloads the runtime (without refreshing the repository) once the turn has ended.',
  ].join(' ');
}

export function SessionPage({ id }: { id: string }) {
  const [page, refetch] = useQuery({ query: SessionPageDocument, variables: { id } });
  useOnConnected(useCallback(() => refetch({ requestPolicy: 'network-only' }), [refetch]));
  const [updated] = useSubscription({ query: SessionUpdatedDocument, variables: { id } });
  const [stopped, setStopped] = useState<SessionHeaderFragment | null>(null);
  // Bumped when Sync Branch & Reload's turn ends: Reloads starts a reload for each bump.
  const [reloadRequests, setReloadRequests] = useState(0);
  const onSynced = useCallback(() => setReloadRequests((n) => n + 1), []);
  const session = newest([page.data?.session, updated.data?.sessionUpdated, stopped]);

  if (page.error) return <Problem problem={problemFromError(page.error)} />;
  if (!session) {
    return page.fetching ? (
      <p aria-busy="true">Loading…</p>
    ) : (
      <section>
        <h1>Session not found</h1>
        <p>
          No session {id} in this account. <a {...linkProps('/')}>Back to the sessions</a>.
        </p>
      </section>
    );
  }
  const live = session.status === 'RUNNING' || session.status === 'PROVISIONING';
  return (
    <>
      <Header session={session} onStopped={setStopped} />
      {updated.error && <Problem problem={problemFromError(updated.error)} />}
      <Reloads
        sessionId={session.sessionId}
        latest={page.data?.session?.reloads.edges[0]?.node ?? null}
        canReload={session.status === 'RUNNING'}
        requests={reloadRequests}
      />
      <div className="session-layout">
        <Conversation
          sessionId={session.sessionId}
          baseRef={session.baseRef}
          ready={session.agentReady}
          live={live}
          onSynced={onSynced}
        />
        <Workspace session={session} />
      </div>
      <CommandPalette />
    </>
  );
}

function newest<T extends { seq: number }>(candidates: (T | null | undefined)[]): T | null {
  let best: T | null = null;
  for (const c of candidates) if (c && (!best || c.seq >= best.seq)) best = c;
  return best;
}

function Header({
  session,
  onStopped,
}: {
  session: SessionHeaderFragment;
  onStopped(session: SessionHeaderFragment): void;
}) {
  const [stopping, stop] = useMutation(StopSessionDocument);
  const [problem, setProblem] = useState<ApiProblem | null>(null);
  const canStop = session.status === 'RUNNING' || session.status === 'PROVISIONING';

  async function onStop() {
    setProblem(null);
    const result = await stop({ input: { sessionId: session.sessionId } });
    if (result.error) return setProblem(problemFromError(result.error));
    const payload = result.data?.stopSession;
    if (payload?.__typename === 'StopSessionSuccess') onStopped(payload.session);
    else if (payload) setProblem(problemFromPayload(payload));
  }

  return (
    <section className="card session-header" aria-labelledby="session-title">
      <div className="section-head">
        <h1 id="session-title">
          Session <span className="mono">{session.branchName.slice(0, 8)}</span>
        </h1>
        <button
          type="button"
          className="danger"
          data-command="stop"
          disabled={!canStop || stopping.fetching}
          onClick={onStop}
        >
          {stopping.fetching ? 'Stopping…' : 'Stop'}
        </button>
      </div>
      <dl className="facts">
        <div>
          <dt>Status</dt>
          <dd data-testid="session-status">
            <StatusBadge status={session.status} />
            {session.provisioningPhase && ` ${session.provisioningPhase.toLowerCase().replaceAll('_', ' ')}`}
          </dd>
        </div>
        <div>
          <dt>Agent</dt>
          <dd data-testid="agent-state" data-ready={session.agentReady}>
            {agentLabel(session)}
          </dd>
        </div>
        <div>
          <dt>Branch</dt>
          <dd className="mono">{session.branchName}</dd>
        </div>
        <div>
          <dt>Base</dt>
          <dd className="mono">{session.baseRef}</dd>
        </div>
        <div>
          <dt>Project</dt>
          <dd>{session.project.name}</dd>
        </div>
        <div>
          <dt>Template</dt>
          <dd>{session.template?.slug ?? 'default'}</dd>
        </div>
        <div>
          <dt>Cost</dt>
          <dd>{formatUsd(session.costUsd)}</dd>
        </div>
        <div>
          <dt>Kept alive</dt>
          <dd data-testid="kept-alive">
            {session.sandbox?.keptAliveBecause ?? (canStop ? 'nothing: idle, the reaper may stop it' : '—')}
          </dd>
        </div>
        <div>
          <dt>Lease</dt>
          <dd>
            {session.lease
              ? session.lease.live
                ? `held (generation ${session.lease.generation}) until ${new Date(session.lease.expiresAt).toLocaleTimeString()}`
                : `released (generation ${session.lease.generation})`
              : 'none'}
          </dd>
        </div>
        {session.stopReason && (
          <div>
            <dt>Stopped</dt>
            <dd data-testid="stop-reason">{session.stopReason}</dd>
          </div>
        )}
        {session.failureReason && (
          <div>
            <dt>Failure</dt>
            <dd>{session.failureReason}</dd>
          </div>
        )}
      </dl>
      <Problem problem={problem} />
    </section>
  );
}

function Reloads({
  sessionId,
  latest,
  canReload,
  requests,
}: {
  sessionId: string;
  latest: ReloadFieldsFragment | null;
  canReload: boolean;
  /** A count: each increase asks for a reload (Sync Branch & Reload's turn ended). */
  requests: number;
}) {
  const [started, setStarted] = useState<ReloadFieldsFragment | null>(null);
  const [reloading, reload] = useMutation(ReloadSessionDocument);
  const [problem, setProblem] = useState<ApiProblem | null>(null);
  const current = started ?? latest;
  const [progress] = useSubscription({
    query: ReloadProgressDocument,
    variables: { reloadId: current?.id ?? '' },
    pause: current?.status !== 'RUNNING',
  });
  const confirmed = progress.data?.reloadProgress;
  const shown = confirmed && confirmed.id === current?.id ? confirmed : current;

  async function onReload() {
    setProblem(null);
    const result = await reload({ input: { sessionId } });
    if (result.error) return setProblem(problemFromError(result.error));
    const payload = result.data?.reloadSession;
    if (payload?.__typename === 'ReloadSessionSuccess') setStarted(payload.reload);
    else if (payload) setProblem(problemFromPayload(payload));
  }

  const handled = useRef(requests);
  useEffect(() => {
    if (requests === handled.current) return;
    handled.current = requests;
    void onReload();
  });

  const running = shown?.status === 'RUNNING';
  return (
    <section className="card" aria-labelledby="reload-title">
      <div className="section-head">
        <h2 id="reload-title">Reload</h2>
        <button
          type="button"
          data-command="reload"
          disabled={!canReload || running || reloading.fetching}
          onClick={onReload}
        >
          {running ? 'Reloading…' : 'Reload'}
        </button>
      </div>
      {shown ? (
        <>
          <p data-testid="reload-status" data-status={shown.status} data-reload={shown.id} aria-live="polite">
            {shown.status === 'RUNNING'
              ? 'Reloading'
              : shown.status === 'SUCCEEDED'
                ? 'Reloaded'
                : 'Reload failed'}{' '}
            (started {new Date(shown.createdAt).toLocaleTimeString()}){shown.error && `: ${shown.error}`}
          </p>
          <ol className="phases">
            {shown.phases.map((p) => (
              <li key={`${p.name}:${p.status}`} data-phase={`${p.name}:${p.status}`} className={p.status}>
                <span className="mono">{p.name.toLowerCase().replaceAll('_', ' ')}</span>{' '}
                {p.status.toLowerCase()}
                {p.message && ` — ${p.message}`}
              </li>
            ))}
          </ol>
        </>
      ) : (
        <p>No reload yet.</p>
      )}
      <Problem problem={problem} />
    </section>
  );
}

interface Pending {
  key: number;
  text: string;
  /** History length when it was sent: shown until the transcript grows past it. */
  historyLength: number;
}

/** Sync Branch & Reload in flight: its message was accepted after the event `afterSeq`. */
interface Sync {
  afterSeq: number;
  state: 'WAITING' | 'RELOADING' | 'FAILED';
}

function Conversation({
  sessionId,
  baseRef,
  ready,
  live,
  onSynced,
}: {
  sessionId: string;
  baseRef: string;
  ready: boolean;
  live: boolean;
  /** Sync Branch & Reload's turn ended without an error: reload now. */
  onSynced(): void;
}) {
  const [history, refetchHistory] = useQuery({
    query: SessionMessagesDocument,
    variables: { id: sessionId },
    requestPolicy: 'network-only',
  });
  const [events] = useSubscription(
    { query: SessionEventsDocument, variables: { sessionId }, pause: !live },
    // Bounded: what is older has been read back into the transcript by then.
    (all: AgentEvent[] = [], data) => [...all.slice(-(MAX_EVENTS - 1)), data.sessionEvents],
  );
  const [sending, send] = useMutation(SendMessageDocument);
  const [aborting, abort] = useMutation(AbortTurnDocument);
  const [text, setText] = useState('');
  const [pending, setPending] = useState<Pending[]>([]);
  const [problem, setProblem] = useState<ApiProblem | null>(null);
  const [sync, setSync] = useState<Sync | null>(null);

  const messages = history.data?.session?.messages.edges.map((edge) => edge.node) ?? [];
  const turn = [...(events.data ?? [])].reverse().find((ev) => ev.kind === 'TURN_STATE');
  const busy = turn?.turnState === 'BUSY';

  // The sync's turn: it was BUSY after the message, and now it is not.
  const syncWaiting = sync?.state === 'WAITING' ? sync.afterSeq : null;
  const syncEnded = useMemo(() => {
    if (syncWaiting === null) return null;
    const after = (events.data ?? []).filter((ev) => ev.kind === 'TURN_STATE' && ev.seq > syncWaiting);
    const last = after.at(-1);
    if (!last || last.turnState === 'BUSY' || !after.some((ev) => ev.turnState === 'BUSY')) return null;
    return last.turnState === 'ERROR' ? 'FAILED' : 'RELOADING';
  }, [events.data, syncWaiting]);
  useEffect(() => {
    if (!syncEnded) return;
    setSync((s) => (s ? { ...s, state: syncEnded } : s));
    if (syncEnded === 'RELOADING') onSynced();
  }, [syncEnded, onSynced]);

  // A turn that ended: read the transcript back (the streamed text becomes the stored message).
  const endedSeq = turn && turn.turnState !== 'BUSY' ? turn.seq : null;
  useEffect(() => {
    if (endedSeq !== null) refetchHistory({ requestPolicy: 'network-only' });
  }, [endedSeq, refetchHistory]);

  // What streams for messages not stored yet: their text as it grows and their tool calls' latest
  // state, in the order they first appeared.
  const streaming = useMemo(() => {
    const known = new Set(messages.map((m) => m.id));
    const byMessage = new Map<string, { text: string; tools: Map<string, PartFieldsFragment> }>();
    for (const ev of events.data ?? []) {
      if (!ev.messageId || known.has(ev.messageId)) continue;
      const entry = byMessage.get(ev.messageId) ?? { text: '', tools: new Map() };
      byMessage.set(ev.messageId, entry);
      if (ev.kind === 'TEXT_DELTA') entry.text += ev.delta ?? '';
      else if (ev.part?.type === 'tool') entry.tools.set(ev.part.id, ev.part);
    }
    return [...byMessage.entries()].filter(([, m]) => m.text !== '' || m.tools.size > 0);
  }, [events.data, messages]);
  const waiting = pending.filter((p) => messages.length <= p.historyLength);

  async function onSend(event: { preventDefault(): void }) {
    event.preventDefault();
    const value = text.trim();
    if (!value) return;
    setProblem(null);
    const result = await send({ input: { sessionId, text: value } });
    if (result.error) return setProblem(problemFromError(result.error));
    const payload = result.data?.sendMessage;
    if (payload?.__typename === 'SendMessageSuccess') {
      setPending((all) => [...all, { key: Date.now(), text: value, historyLength: messages.length }]);
      setText('');
    } else if (payload) setProblem(problemFromPayload(payload));
  }

  async function onSync() {
    setProblem(null);
    const afterSeq = (events.data ?? []).at(-1)?.seq ?? 0;
    const value = syncInstruction(baseRef);
    const result = await send({ input: { sessionId, text: value } });
    if (result.error) return setProblem(problemFromError(result.error));
    const payload = result.data?.sendMessage;
    if (payload?.__typename === 'SendMessageSuccess') {
      setPending((all) => [...all, { key: Date.now(), text: value, historyLength: messages.length }]);
      setSync({ afterSeq, state: 'WAITING' });
    } else if (payload) setProblem(problemFromPayload(payload));
  }

  async function onAbort() {
    setProblem(null);
    const result = await abort({ input: { sessionId } });
    if (result.error) return setProblem(problemFromError(result.error));
    const payload = result.data?.abortTurn;
    if (payload && payload.__typename !== 'AbortTurnSuccess') setProblem(problemFromPayload(payload));
  }

  return (
    <section className="card conversation" aria-labelledby="conversation-title">
      <div className="section-head">
        <h2 id="conversation-title">Conversation</h2>
        <span data-testid="turn-state" data-state={turn?.turnState ?? 'NONE'} aria-live="polite">
          {busy ? 'Agent is working…' : turn?.turnState === 'ERROR' ? `Turn failed: ${turn.error ?? ''}` : ''}
        </span>
      </div>
      {history.error && <Problem problem={problemFromError(history.error)} />}
      {!history.data && history.fetching && <p aria-busy="true">Loading the conversation…</p>}
      {events.error && <Problem problem={problemFromError(events.error)} />}
      <ol className="transcript" aria-label="Transcript">
        {messages.map((m) => (
          <li key={m.id} className={`message ${m.role}`} data-role={m.role} data-message={m.id}>
            <span className="role">{m.role}</span>
            <Parts parts={m.parts} text={m.text} />
            {m.error && <p className="problem">{m.error}</p>}
          </li>
        ))}
        {waiting.map((p) => (
          <li key={p.key} className="message user" data-role="user" data-pending="true">
            <span className="role">user</span>
            <p>{p.text}</p>
          </li>
        ))}
        {streaming.map(([messageId, m]) => (
          <li key={messageId} className="message assistant" data-role="assistant" data-streaming="true">
            <span className="role">assistant</span>
            {[...m.tools.values()].map((part) => (
              <ToolCall key={part.id} part={part} />
            ))}
            {m.text && <p>{m.text}</p>}
          </li>
        ))}
      </ol>
      {live ? (
        <form className="composer" onSubmit={onSend}>
          <label htmlFor="message" className="visually-hidden">
            Message
          </label>
          <textarea
            id="message"
            rows={2}
            value={text}
            placeholder={ready ? 'Ask the agent…' : 'The agent is starting…'}
            onChange={(e) => setText(e.target.value)}
            onKeyDown={(e) => {
              if (e.key === 'Enter' && (e.metaKey || e.ctrlKey)) void onSend(e);
            }}
          />
          <button type="submit" disabled={!ready || sending.fetching || text.trim() === ''}>
            Send
          </button>
          <button type="button" data-command="abort" disabled={!busy || aborting.fetching} onClick={onAbort}>
            Abort turn
          </button>
          <button
            type="button"
            className="secondary"
            data-command="sync"
            disabled={!ready || busy || sending.fetching || sync?.state === 'WAITING'}
            onClick={onSync}
          >
            Sync Branch &amp; Reload
          </button>
        </form>
      ) : (
        <p data-testid="ended">
          The session has ended: this is its record. To go on from here, start a new session on{' '}
          <a {...linkProps('/')}>the sessions page</a>.
        </p>
      )}
      {sync && (
        <p data-testid="sync-state" data-state={sync.state} aria-live="polite">
          {sync.state === 'WAITING'
            ? `Sync Branch & Reload: the agent is reconciling the branch with ${baseRef}; the reload starts when its turn ends.`
            : sync.state === 'RELOADING'
              ? 'Sync Branch & Reload: the agent’s turn ended; reloading (see Reload above).'
              : 'Sync Branch & Reload: the agent’s turn failed, so the runtime was not reloaded.'}
        </p>
      )}
      <Problem problem={problem} />
    </section>
  );
}

/**
 * A stored message's parts in order: text as paragraphs, tool calls as blocks; reasoning and
 * bookkeeping parts (step-start, snapshot, …) stay out. A message without parts shows its text.
 */
function Parts({ parts, text }: { parts: PartFieldsFragment[]; text: string }) {
  const shown = parts.filter((p) => (p.type === 'text' && p.text) || p.type === 'tool');
  if (shown.length === 0) return text ? <p>{text}</p> : null;
  return (
    <>
      {shown.map((p) => (p.type === 'tool' ? <ToolCall key={p.id} part={p} /> : <p key={p.id}>{p.text}</p>))}
    </>
  );
}
