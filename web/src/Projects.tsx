// Projects: the list, and a project's templates (clamp/GPU warnings, snapshot state), secrets (names
// and runtime-delivery flags; values are write-only: the form sets one, nothing reads one back) and
// triggers with their last runs.
import { useState } from 'react';
import { useMutation, useQuery } from 'urql';
import { type ApiProblem, Problem, problemFromError, problemFromPayload } from './errors';
import { ProjectListDocument, ProjectPageDocument, SetSecretDocument } from './generated/graphql';
import { linkProps } from './router';

export function Projects() {
  const [list] = useQuery({ query: ProjectListDocument });
  if (list.error) return <Problem problem={problemFromError(list.error)} />;
  const projects = list.data?.viewer.projects.edges.map((edge) => edge.node) ?? [];
  return (
    <section className="card" aria-labelledby="projects-title">
      <h1 id="projects-title">Projects</h1>
      {list.data && projects.length === 0 && <p>No projects yet: create one through the API.</p>}
      <ul className="plain" data-testid="projects">
        {projects.map((p) => (
          <li key={p.id}>
            <a {...linkProps(`/projects/${encodeURIComponent(p.id)}`)}>{p.name}</a>{' '}
            <span className="muted">
              {p.provider} · {p.defaultBranch} · <span className="mono">{p.repositoryUrl}</span>
            </span>
          </li>
        ))}
      </ul>
    </section>
  );
}

export function ProjectPage({ id }: { id: string }) {
  const [page, refetch] = useQuery({ query: ProjectPageDocument, variables: { id } });
  if (page.error) return <Problem problem={problemFromError(page.error)} />;
  const project = page.data?.project;
  if (!project) return page.fetching ? <p aria-busy="true">Loading…</p> : <h1>Project not found</h1>;
  return (
    <>
      <section className="card" aria-labelledby="project-title">
        <h1 id="project-title">{project.name}</h1>
        <p>
          {project.provider} · default branch <span className="mono">{project.defaultBranch}</span> ·{' '}
          <span className="mono">{project.repositoryUrl}</span>
        </p>
        <p>
          {project.manifestCommit
            ? `Manifest from ${project.manifestCommit.slice(0, 8)}, synced ${new Date(project.manifestSyncedAt ?? '').toLocaleString()}.`
            : 'No manifest synced: sessions use the default template.'}
        </p>
      </section>
      <section className="card" aria-labelledby="templates-title">
        <h2 id="templates-title">Templates</h2>
        <ul className="plain" data-testid="templates">
          {project.templates.map((t) => (
            <li key={t.id}>
              <strong>{t.name}</strong> <span className="mono">({t.slug})</span>
              {t.isDefault && ' · default'} · {t.cpu} CPU, {t.memoryGiB} GiB memory, {t.diskGiB} GiB disk ·
              snapshot {t.snapshot ? t.snapshot.status.toLowerCase() : 'none'}
              {t.snapshot?.error && <span className="problem">{t.snapshot.error}</span>}
              {t.warnings.map((w) => (
                <p key={w} className="warning">
                  {w}
                </p>
              ))}
            </li>
          ))}
        </ul>
        {project.templates.length === 0 && <p>No templates: the manifest defines none.</p>}
      </section>
      <Secrets
        projectId={project.id}
        secrets={project.secrets}
        onChanged={() => refetch({ requestPolicy: 'network-only' })}
      />
      <section className="card" aria-labelledby="triggers-title">
        <h2 id="triggers-title">Triggers</h2>
        {project.triggers.edges.length === 0 && <p>No triggers.</p>}
        <ul className="plain">
          {project.triggers.edges.map(({ node: t }) => (
            <li key={t.id}>
              <strong>{t.name}</strong> · {t.kind.toLowerCase()}
              {t.schedule && ` · ${t.schedule} UTC`}
              {t.paused
                ? ' · paused'
                : t.nextFireAt
                  ? ` · next ${new Date(t.nextFireAt).toLocaleString()}`
                  : ''}
              <ul>
                {t.runs.edges.map(({ node: r }) => (
                  <li key={r.id}>
                    {new Date(r.createdAt).toLocaleString()} · {r.status.toLowerCase()}
                    {r.reason && ` · ${r.reason}`}
                    {r.sessionId && (
                      <>
                        {' '}
                        · <a {...linkProps(`/sessions/${r.sessionId}`)}>session</a>
                      </>
                    )}
                  </li>
                ))}
              </ul>
            </li>
          ))}
        </ul>
      </section>
    </>
  );
}

function Secrets({
  projectId,
  secrets,
  onChanged,
}: {
  projectId: string;
  secrets: { name: string; runtimeDelivery: boolean; updatedAt: string }[];
  onChanged(): void;
}) {
  const [setting, setSecret] = useMutation(SetSecretDocument);
  const [name, setName] = useState('');
  const [value, setValue] = useState('');
  const [runtimeDelivery, setRuntimeDelivery] = useState(false);
  const [problem, setProblem] = useState<ApiProblem | null>(null);

  async function submit(event: { preventDefault(): void }) {
    event.preventDefault();
    setProblem(null);
    const result = await setSecret({ input: { projectId, name: name.trim(), value, runtimeDelivery } });
    if (result.error) return setProblem(problemFromError(result.error));
    const payload = result.data?.setSecret;
    if (payload?.__typename === 'SetSecretSuccess') {
      setName('');
      setValue('');
      onChanged();
    } else if (payload) setProblem(problemFromPayload(payload));
  }

  return (
    <section className="card" aria-labelledby="secrets-title">
      <h2 id="secrets-title">Secrets</h2>
      <ul className="plain" data-testid="secrets">
        {secrets.map((s) => (
          <li key={s.name} data-secret={s.name}>
            <span className="mono">{s.name}</span> ·{' '}
            {s.runtimeDelivery ? 'delivered into sandboxes' : 'not delivered into sandboxes'} · updated{' '}
            {new Date(s.updatedAt).toLocaleString()}
          </li>
        ))}
      </ul>
      {secrets.length === 0 && <p>No secrets.</p>}
      <form className="create" onSubmit={submit}>
        <label>
          Secret name
          <input name="secretName" required value={name} onChange={(e) => setName(e.target.value)} />
        </label>
        <label>
          Value (write-only)
          <input
            name="secretValue"
            type="password"
            autoComplete="off"
            required
            value={value}
            onChange={(e) => setValue(e.target.value)}
          />
        </label>
        <label className="check">
          <input
            type="checkbox"
            checked={runtimeDelivery}
            onChange={(e) => setRuntimeDelivery(e.target.checked)}
          />{' '}
          Deliver into sandboxes
        </label>
        <button type="submit" disabled={setting.fetching}>
          Set secret
        </button>
      </form>
      <Problem problem={problem} />
    </section>
  );
}
