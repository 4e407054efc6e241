// The account's sessions, live: the first page from `sessions`, then every change from
// `accountSessions` (newest seq of a session wins), refetched whenever the WebSocket (re)connects so
// nothing that happened while it was away is missed. Plus the create-session form.
import { useCallback, useMemo, useState } from 'react';
import { useMutation, useQuery, useSubscription } from 'urql';
import { useOnConnected } from './api-context';
import { type ApiProblem, Problem, problemFromError, problemFromPayload } from './errors';
import {
  AccountSessionsDocument,
  CreateSessionDocument,
  ProjectsDocument,
  type SessionRowFragment,
  type SessionStatus,
  SessionsDocument,
} from './generated/graphql';
import { linkProps, navigate } from './router';
import { StatusBadge, agentLabel, formatUsd } from './status';

const STATUSES: SessionStatus[] = ['PROVISIONING', 'RUNNING', 'STOPPED', 'FAILED'];

function merge(into: Map<string, SessionRowFragment>, rows: readonly SessionRowFragment[]) {
  for (const row of rows) {
    const known = into.get(row.id);
    if (!known || known.seq <= row.seq) into.set(row.id, row);
  }
}

export function Sessions() {
  const [list, refetch] = useQuery({ query: SessionsDocument, variables: { first: 100 } });
  useOnConnected(useCallback(() => refetch({ requestPolicy: 'network-only' }), [refetch]));
  const [live] = useSubscription(
    { query: AccountSessionsDocument },
    // The newest event of each session only: a tab left open for days stays as small as the list.
    (latest: SessionRowFragment[] = [], data) => [
      ...latest.filter((s) => s.id !== data.accountSessions.id),
      data.accountSessions,
    ],
  );
  const [status, setStatus] = useState<SessionStatus | ''>('');
  const [search, setSearch] = useState('');

  const rows = useMemo(() => {
    const byId = new Map<string, SessionRowFragment>();
    merge(byId, list.data?.sessions.edges.map((edge) => edge.node) ?? []);
    merge(byId, live.data ?? []);
    const needle = search.trim().toLowerCase();
    return [...byId.values()]
      .filter((s) => !status || s.status === status)
      .filter(
        (s) =>
          !needle ||
          [s.branchName, s.project.name, s.template?.slug ?? '', s.baseRef].some((v) =>
            v.toLowerCase().includes(needle),
          ),
      )
      .sort((a, b) => b.createdAt.localeCompare(a.createdAt));
  }, [list.data, live.data, status, search]);

  return (
    <>
      <CreateSession />
      <section aria-labelledby="sessions-title">
        <div className="section-head">
          <h1 id="sessions-title">Sessions</h1>
          <div className="filters">
            <label>
              Status{' '}
              <select value={status} onChange={(e) => setStatus(e.target.value as SessionStatus | '')}>
                <option value="">all</option>
                {STATUSES.map((s) => (
                  <option key={s} value={s}>
                    {s.toLowerCase()}
                  </option>
                ))}
              </select>
            </label>
            <label>
              Search <input type="search" value={search} onChange={(e) => setSearch(e.target.value)} />
            </label>
          </div>
        </div>
        {list.error && <Problem problem={problemFromError(list.error)} />}
        {live.error && <Problem problem={problemFromError(live.error)} />}
        {/* Scrolls sideways on a narrow screen: focusable, so a keyboard can scroll it too. */}
        {/* biome-ignore lint/a11y/noNoninteractiveTabindex: a scrollable region must take focus */}
        <section className="table-wrap" aria-label="Sessions table" tabIndex={0}>
          <table className="sessions">
            <thead>
              <tr>
                <th scope="col">Branch</th>
                <th scope="col">Status</th>
                <th scope="col">Agent</th>
                <th scope="col">Project</th>
                <th scope="col">Template</th>
                <th scope="col">Cost</th>
                <th scope="col">Created</th>
              </tr>
            </thead>
            <tbody>
              {rows.map((s) => (
                <tr key={s.id} data-session={s.sessionId} data-status={s.status}>
                  <td>
                    <a className="mono" {...linkProps(`/sessions/${s.sessionId}`)}>
                      {s.branchName.slice(0, 8)}
                    </a>
                  </td>
                  <td>
                    <StatusBadge status={s.status} />
                  </td>
                  <td data-agent-ready={s.agentReady}>{agentLabel(s)}</td>
                  <td>
                    <a {...linkProps(`/projects/${encodeURIComponent(s.project.id)}`)}>{s.project.name}</a>
                  </td>
                  <td>{s.template?.slug ?? 'default'}</td>
                  <td>{formatUsd(s.costUsd)}</td>
                  <td>{new Date(s.createdAt).toLocaleString()}</td>
                </tr>
              ))}
            </tbody>
          </table>
          {rows.length === 0 && !list.fetching && <p className="empty">No sessions yet.</p>}
        </section>
      </section>
    </>
  );
}

function CreateSession() {
  const [projects] = useQuery({ query: ProjectsDocument });
  const [created, create] = useMutation(CreateSessionDocument);
  const [projectId, setProjectId] = useState('');
  const [baseRef, setBaseRef] = useState('');
  const [templateSlug, setTemplateSlug] = useState('');
  const [prompt, setPrompt] = useState('');
  const [problem, setProblem] = useState<ApiProblem | null>(null);
  const all = projects.data?.viewer.projects.edges.map((edge) => edge.node) ?? [];
  const project = all.find((p) => p.id === projectId) ?? all[0];

  async function submit(event: { preventDefault(): void }) {
    event.preventDefault();
    if (!project) return;
    setProblem(null);
    const result = await create({
      input: {
        projectId: project.id,
        ...(baseRef.trim() ? { baseRef: baseRef.trim() } : {}),
        ...(templateSlug ? { templateSlug } : {}),
        ...(prompt.trim() ? { prompt: prompt.trim() } : {}),
      },
    });
    if (result.error) return setProblem(problemFromError(result.error));
    const payload = result.data?.createSession;
    if (payload?.__typename === 'CreateSessionSuccess') navigate(`/sessions/${payload.session.sessionId}`);
    else if (payload) setProblem(problemFromPayload(payload));
  }

  return (
    <section aria-labelledby="create-title" className="card">
      <h2 id="create-title">New session</h2>
      {projects.error && <Problem problem={problemFromError(projects.error)} />}
      {projects.data && all.length === 0 && <p>No projects yet: create one through the API first.</p>}
      <form className="create" onSubmit={submit}>
        <label>
          Project
          <select
            name="project"
            value={project?.id ?? ''}
            onChange={(e) => {
              setProjectId(e.target.value);
              setTemplateSlug('');
            }}
          >
            {all.map((p) => (
              <option key={p.id} value={p.id}>
                {p.name}
              </option>
            ))}
          </select>
        </label>
        <label>
          Base ref
          <input
            name="baseRef"
            value={baseRef}
            placeholder={project?.defaultBranch ?? 'main'}
            onChange={(e) => setBaseRef(e.target.value)}
          />
        </label>
        <label>
          Template
          <select name="template" value={templateSlug} onChange={(e) => setTemplateSlug(e.target.value)}>
            <option value="">project default</option>
            {project?.templates.map((t) => (
              <option key={t.id} value={t.slug}>
                {t.name} ({t.slug})
              </option>
            ))}
          </select>
        </label>
        <label className="wide">
          Prompt
          <textarea name="prompt" rows={2} value={prompt} onChange={(e) => setPrompt(e.target.value)} />
        </label>
        <button type="submit" disabled={!project || created.fetching}>
          {created.fetching ? 'Creating…' : 'Create session'}
        </button>
      </form>
      <Problem problem={problem} />
    </section>
  );
}
