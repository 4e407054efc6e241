// The account's sessions, live: pages of `sessions` (100 at a time, the next one fetched when the
// view nears the end of what is loaded), then every change from `accountSessions` (newest seq of a
// session wins), refetched whenever the WebSocket (re)connects so nothing that happened while it was
// away is missed. Only the rows in view are rendered, so a thousand sessions scroll like ten. Plus
// the create-session form.
import { useCallback, useEffect, useMemo, useRef, useState } from 'react';
import { useClient, useMutation, useQuery, useSubscription } from 'urql';
import { useOnConnected } from './api-context';
import { DataTable } from './DataTable';
import { type ApiProblem, Problem, problemFromError, useMutationProblem } from './errors';
import {
  AccountSessionsDocument,
  CreateSessionDocument,
  ProjectsDocument,
  type SessionFieldsFragment,
  type SessionStatus,
  SessionsDocument,
} from './generated/graphql';
import { linkProps, navigate } from './router';
import { StatusBadge, agentLabel, formatUsd } from './status';

const STATUSES: SessionStatus[] = ['PROVISIONING', 'RUNNING', 'STOPPED', 'FAILED'];
/** The server's largest page. */
const PAGE_SIZE = 100;
/** Fixed so the list can be virtualised: cells never wrap (see .table-wrap.virtual). */
const ROW_HEIGHT_PX = 41;
const COLUMNS = ['Branch', 'Status', 'Agent', 'Project', 'Template', 'Cost', 'Created'];

function merge(into: Map<string, SessionFieldsFragment>, rows: readonly SessionFieldsFragment[]) {
  for (const row of rows) {
    const known = into.get(row.id);
    if (!known || known.seq <= row.seq) into.set(row.id, row);
  }
}

interface Pages {
  rows: SessionFieldsFragment[];
  endCursor: string | null;
  hasNextPage: boolean;
  fetching: boolean;
  problem: ApiProblem | null;
}

const NO_PAGES: Pages = { rows: [], endCursor: null, hasNextPage: true, fetching: true, problem: null };

/**
 * The loaded pages of `sessions`: `loadMore` appends the next page; `refresh` reloads from the top as
 * many rows as were loaded (after a reconnect, or a new filter). A response to a superseded request
 * is dropped.
 */
function useSessionPages(status: SessionStatus | '') {
  const client = useClient();
  const [pages, setPages] = useState<Pages>(NO_PAGES);
  const current = useRef(pages);
  current.current = pages;
  const generation = useRef(0);
  const busy = useRef(false);

  /**
   * The page after `after`, or null when request `mine` was superseded meanwhile or failed (then the
   * failure is shown and fetching stops).
   */
  const fetchPage = useCallback(
    async (after: string | null, mine: number) => {
      const result = await client
        .query(
          SessionsDocument,
          { first: PAGE_SIZE, ...(after ? { after } : {}), ...(status ? { status } : {}) },
          { requestPolicy: 'network-only' },
        )
        .toPromise();
      if (mine !== generation.current) return null;
      if (result.error || !result.data) {
        setPages((p) => ({
          ...p,
          fetching: false,
          problem: result.error ? problemFromError(result.error) : null,
        }));
        return null;
      }
      return result.data.sessions;
    },
    [client, status],
  );

  const refresh = useCallback(async () => {
    const mine = ++generation.current;
    busy.current = true;
    const wanted = Math.max(current.current.rows.length, PAGE_SIZE);
    const rows: SessionFieldsFragment[] = [];
    let after: string | null = null;
    setPages((p) => ({ ...p, fetching: true }));
    try {
      for (;;) {
        const page = await fetchPage(after, mine);
        if (!page) return;
        const { edges, pageInfo } = page;
        rows.push(...edges.map((edge) => edge.node));
        after = pageInfo.endCursor ?? null;
        const done = !pageInfo.hasNextPage || rows.length >= wanted;
        setPages({
          rows: [...rows],
          endCursor: after,
          hasNextPage: pageInfo.hasNextPage,
          fetching: !done,
          problem: null,
        });
        if (done) return;
      }
    } finally {
      if (mine === generation.current) busy.current = false;
    }
  }, [fetchPage]);

  const loadMore = useCallback(async () => {
    const { endCursor, hasNextPage } = current.current;
    if (busy.current || !hasNextPage || !endCursor) return;
    const mine = generation.current;
    busy.current = true;
    setPages((p) => ({ ...p, fetching: true }));
    try {
      const page = await fetchPage(endCursor, mine);
      if (!page) return;
      const { edges, pageInfo } = page;
      setPages((p) => ({
        rows: [...p.rows, ...edges.map((edge) => edge.node)],
        endCursor: pageInfo.endCursor ?? null,
        hasNextPage: pageInfo.hasNextPage,
        fetching: false,
        problem: null,
      }));
    } finally {
      if (mine === generation.current) busy.current = false;
    }
  }, [fetchPage]);

  useEffect(() => {
    current.current = NO_PAGES;
    setPages(NO_PAGES);
    void refresh();
  }, [refresh]);
  useOnConnected(useCallback(() => void refresh(), [refresh]));
  return { pages, loadMore };
}

export function Sessions() {
  const [status, setStatus] = useState<SessionStatus | ''>('');
  const [search, setSearch] = useState('');
  const { pages, loadMore } = useSessionPages(status);
  const [live] = useSubscription(
    { query: AccountSessionsDocument },
    // The newest event of each session only: a tab left open for days stays as small as the list.
    (latest: SessionFieldsFragment[] = [], data) => [
      ...latest.filter((s) => s.id !== data.accountSessions.id),
      data.accountSessions,
    ],
  );

  const rows = useMemo(() => {
    const byId = new Map<string, SessionFieldsFragment>();
    merge(byId, pages.rows);
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
      .sort((a, b) => b.createdAt.localeCompare(a.createdAt) || b.id.localeCompare(a.id));
  }, [pages.rows, live.data, status, search]);
  const onNearEnd = useCallback(() => void loadMore(), [loadMore]);

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
        <p className="muted" data-testid="session-count" data-loaded={pages.rows.length} aria-live="polite">
          {rows.length} session(s) shown
          {pages.hasNextPage ? ', more load as you scroll' : ''}
          {search.trim() ? ' (the search covers the loaded sessions)' : ''}
        </p>
        {pages.problem && <Problem problem={pages.problem} />}
        {live.error && <Problem problem={problemFromError(live.error)} />}
        <DataTable
          label="Sessions table"
          columns={COLUMNS}
          rows={rows}
          rowKey={(s) => s.id}
          rowProps={(s) => ({ 'data-session': s.sessionId, 'data-status': s.status })}
          virtual={{ rowHeightPx: ROW_HEIGHT_PX, onNearEnd }}
          empty={!pages.fetching && <p className="empty">No sessions yet.</p>}
          cells={(s) => (
            <>
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
            </>
          )}
        />
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
  const { problem, settle } = useMutationProblem();
  const all = projects.data?.viewer.projects.edges.map((edge) => edge.node) ?? [];
  const project = all.find((p) => p.id === projectId) ?? all[0];

  async function submit(event: { preventDefault(): void }) {
    event.preventDefault();
    if (!project) return;
    const created = await settle(
      create({
        input: {
          projectId: project.id,
          ...(baseRef.trim() ? { baseRef: baseRef.trim() } : {}),
          ...(templateSlug ? { templateSlug } : {}),
          ...(prompt.trim() ? { prompt: prompt.trim() } : {}),
        },
      }),
      (data) => data.createSession,
      'CreateSessionSuccess',
    );
    if (created) navigate(`/sessions/${created.session.sessionId}`);
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
