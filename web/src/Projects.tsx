// Projects: the list, and a project's templates (clamp/GPU warnings, snapshot state), secrets (names
// and runtime-delivery flags; values are write-only: the form sets one, nothing reads one back) and
// triggers with their last runs: create one (a webhook's signing key is shown once), pause or resume
// it, delete it after a confirmation.
import { useState } from 'react';
import { useMutation, useQuery } from 'urql';
import { ConfirmButton } from './Confirm';
import { Problem, problemFromError, useMutationProblem } from './errors';
import { EMPTY_PROJECT, type ProjectFields, ProjectForm, useProjectMutation } from './ProjectForm';
import {
  CreateProjectDocument,
  CreateTriggerDocument,
  DeleteProjectDocument,
  DeleteTriggerDocument,
  PauseTriggerDocument,
  ProjectListDocument,
  type Provider,
  SyncProjectManifestDocument,
  UpdateProjectDocument,
  ProjectPageDocument,
  SetSecretDocument,
  type TriggerKind,
  type TriggerViewFragment,
} from './generated/graphql';
import { linkProps, navigate } from './router';
import { ShownOnce } from './ShownOnce';

export function Projects() {
  const [list, refetch] = useQuery({ query: ProjectListDocument });
  const [creating, create] = useMutation(CreateProjectDocument);
  const { errors, submit } = useProjectMutation();
  if (list.error) return <Problem problem={problemFromError(list.error)} />;
  const projects = list.data?.viewer.projects.edges.map((edge) => edge.node) ?? [];

  async function onCreate(fields: ProjectFields): Promise<boolean> {
    const created = await submit(
      create({ input: projectInput(fields) }),
      (data) => data.createProject,
      'CreateProjectSuccess',
    );
    if (!created) return false;
    refetch({ requestPolicy: 'network-only' });
    navigate(`/projects/${encodeURIComponent(created.project.id)}`);
    return true;
  }

  return (
    <>
      <section className="card" aria-labelledby="projects-title">
        <h1 id="projects-title">Projects</h1>
        {list.data && projects.length === 0 && (
          <p data-testid="no-projects">
            No projects yet: <a href="#new-project">create one with the form below</a> from a repository URL
            or a local path.
          </p>
        )}
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
      <section className="card" aria-labelledby="new-project-title">
        <h2 id="new-project-title">New project</h2>
        <ProjectForm
          id="new-project"
          initial={EMPTY_PROJECT}
          submitLabel={creating.fetching ? 'Creating…' : 'Create project'}
          busy={creating.fetching}
          errors={errors}
          onSubmit={onCreate}
        />
      </section>
    </>
  );
}

/** The form's fields as mutation input: empty optional fields are left out (the API's defaults). */
function projectInput(fields: ProjectFields) {
  return {
    name: fields.name.trim(),
    repositoryUrl: fields.repositoryUrl.trim(),
    ...(fields.gitCredential ? { gitCredential: fields.gitCredential } : {}),
    ...(fields.provider ? { provider: fields.provider } : {}),
    ...(fields.defaultBranch.trim() ? { defaultBranch: fields.defaultBranch.trim() } : {}),
  };
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
        <ManifestSync
          projectId={project.id}
          defaultBranch={project.defaultBranch}
          commit={project.manifestCommit}
          syncedAt={project.manifestSyncedAt}
          onSynced={() => refetch({ requestPolicy: 'network-only' })}
        />
      </section>
      <ProjectSettings project={project} onSaved={() => refetch({ requestPolicy: 'network-only' })} />
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
      <Triggers
        projectId={project.id}
        triggers={project.triggers.edges.map((edge) => edge.node)}
        onChanged={() => refetch({ requestPolicy: 'network-only' })}
      />
    </>
  );
}

/** Edit the project (a changed repository or branch re-reads the manifest) or delete it. */
function ProjectSettings({
  project,
  onSaved,
}: {
  project: {
    id: string;
    name: string;
    repositoryUrl: string;
    provider: Provider;
    defaultBranch: string;
    hasGitCredential: boolean;
  };
  onSaved(): void;
}) {
  const [updating, update] = useMutation(UpdateProjectDocument);
  const [deleting, remove] = useMutation(DeleteProjectDocument);
  const { errors, submit } = useProjectMutation();
  const removal = useMutationProblem();
  const [saved, setSaved] = useState(false);

  async function onSave(fields: ProjectFields): Promise<boolean> {
    setSaved(false);
    const input = {
      projectId: project.id,
      ...(fields.name.trim() !== project.name ? { name: fields.name.trim() } : {}),
      ...(fields.repositoryUrl.trim() !== project.repositoryUrl
        ? { repositoryUrl: fields.repositoryUrl.trim() }
        : {}),
      ...(fields.provider && fields.provider !== project.provider ? { provider: fields.provider } : {}),
      ...(fields.defaultBranch.trim() && fields.defaultBranch.trim() !== project.defaultBranch
        ? { defaultBranch: fields.defaultBranch.trim() }
        : {}),
      ...(fields.gitCredential ? { gitCredential: fields.gitCredential } : {}),
    };
    const updated = await submit(update({ input }), (data) => data.updateProject, 'UpdateProjectSuccess');
    if (!updated) return false;
    setSaved(true);
    onSaved();
    return true;
  }

  async function onDelete() {
    const input = { projectId: project.id };
    if (await removal.settle(remove({ input }), (data) => data.deleteProject, 'DeleteProjectSuccess'))
      navigate('/projects');
  }

  return (
    <section className="card" aria-labelledby="settings-title">
      <div className="section-head">
        <h2 id="settings-title">Settings</h2>
        <ConfirmButton
          label={`Delete ${project.name}`}
          question={`Delete ${project.name} with its templates, secrets and triggers? Its repository stays as it is.`}
          confirmLabel="Delete project"
          disabled={deleting.fetching}
          onConfirm={() => void onDelete()}
        />
      </div>
      <Problem problem={removal.problem} />
      <ProjectForm
        id="project-settings"
        initial={{
          name: project.name,
          repositoryUrl: project.repositoryUrl,
          gitCredential: '',
          provider: project.provider,
          defaultBranch: project.defaultBranch,
        }}
        submitLabel={updating.fetching ? 'Saving…' : 'Save changes'}
        busy={updating.fetching}
        errors={errors}
        hasCredential={project.hasGitCredential}
        onSubmit={onSave}
      />
      {saved && (
        <p role="status" data-testid="project-saved">
          Saved.
        </p>
      )}
    </section>
  );
}

/** The manifest's commit and a re-sync: the templates are read again from the default branch. */
function ManifestSync({
  projectId,
  defaultBranch,
  commit,
  syncedAt,
  onSynced,
}: {
  projectId: string;
  defaultBranch: string;
  commit: string | null;
  syncedAt: string | null;
  onSynced(): void;
}) {
  const [syncing, sync] = useMutation(SyncProjectManifestDocument);
  const { problem, settle } = useMutationProblem();
  const [result, setResult] = useState<{ commit: string; warnings: string[] } | null>(null);
  const [problems, setProblems] = useState<{ field: string[]; message: string }[]>([]);

  async function onSync() {
    setResult(null);
    setProblems([]);
    const pending = sync({ input: { projectId } });
    const synced = await settle(pending, (data) => data.syncProjectManifest, 'SyncProjectManifestSuccess');
    if (synced) {
      setResult({ commit: synced.commit, warnings: synced.warnings });
      onSynced();
      return;
    }
    const payload = (await pending).data?.syncProjectManifest;
    if (payload?.__typename === 'ManifestInvalidError') setProblems(payload.problems);
  }

  return (
    <div className="manifest">
      <div className="section-head">
        <p data-testid="manifest-state">
          {commit
            ? `Manifest from ${commit.slice(0, 8)}, synced ${new Date(syncedAt ?? '').toLocaleString()}.`
            : 'No manifest synced: sessions use the default template.'}
        </p>
        <button type="button" disabled={syncing.fetching} onClick={() => void onSync()}>
          {syncing.fetching ? 'Syncing…' : 'Re-sync manifest'}
        </button>
      </div>
      {result && (
        <p role="status">
          Read the manifest at {result.commit.slice(0, 8)} on <span className="mono">{defaultBranch}</span>.
        </p>
      )}
      {result?.warnings.map((w) => (
        <p key={w} className="warning">
          {w}
        </p>
      ))}
      <Problem problem={problem} />
      {problems.length > 0 && (
        <ul className="problem" aria-label="Manifest problems">
          {problems.map((p) => (
            <li key={`${p.field.join('.')}:${p.message}`}>
              <span className="mono">{p.field.join('.')}</span>: {p.message}
            </li>
          ))}
        </ul>
      )}
    </div>
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
  const { problem, settle } = useMutationProblem();

  async function submit(event: { preventDefault(): void }) {
    event.preventDefault();
    const set = await settle(
      setSecret({ input: { projectId, name: name.trim(), value, runtimeDelivery } }),
      (data) => data.setSecret,
      'SetSecretSuccess',
    );
    if (!set) return;
    setName('');
    setValue('');
    onChanged();
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

function Triggers({
  projectId,
  triggers,
  onChanged,
}: {
  projectId: string;
  triggers: TriggerViewFragment[];
  onChanged(): void;
}) {
  const [creating, create] = useMutation(CreateTriggerDocument);
  const [pausing, pause] = useMutation(PauseTriggerDocument);
  const [deleting, remove] = useMutation(DeleteTriggerDocument);
  const [name, setName] = useState('');
  const [kind, setKind] = useState<TriggerKind>('SCHEDULE');
  const [schedule, setSchedule] = useState('0 6 * * 1-5');
  const [prompt, setPrompt] = useState('');
  const [webhookSecret, setWebhookSecret] = useState<string | null>(null);
  const { problem, settle } = useMutationProblem();

  async function submit(event: { preventDefault(): void }) {
    event.preventDefault();
    setWebhookSecret(null);
    const created = await settle(
      create({
        input: {
          projectId,
          name: name.trim(),
          kind,
          ...(kind === 'SCHEDULE' ? { schedule: schedule.trim() } : {}),
          ...(prompt.trim() ? { prompt: prompt.trim() } : {}),
        },
      }),
      (data) => data.createTrigger,
      'CreateTriggerSuccess',
    );
    if (!created) return;
    setWebhookSecret(created.webhookSecret ?? null);
    setName('');
    setPrompt('');
    onChanged();
  }

  async function onPause(trigger: TriggerViewFragment) {
    const input = { triggerId: trigger.id, paused: !trigger.paused };
    if (await settle(pause({ input }), (data) => data.pauseTrigger, 'PauseTriggerSuccess')) onChanged();
  }

  async function onDelete(trigger: TriggerViewFragment) {
    const input = { triggerId: trigger.id };
    if (await settle(remove({ input }), (data) => data.deleteTrigger, 'DeleteTriggerSuccess')) onChanged();
  }

  return (
    <section className="card" aria-labelledby="triggers-title">
      <h2 id="triggers-title">Triggers</h2>
      {triggers.length === 0 && <p>No triggers.</p>}
      <ul className="plain triggers">
        {triggers.map((t) => (
          <li key={t.id} data-trigger={t.name} data-paused={t.paused}>
            <div className="section-head">
              <span>
                <strong>{t.name}</strong> · {t.kind.toLowerCase()}
                {t.schedule && ` · ${t.schedule} UTC`}
                <span data-testid="trigger-state">
                  {t.paused
                    ? ' · paused'
                    : t.nextFireAt
                      ? ` · next ${new Date(t.nextFireAt).toLocaleString()}`
                      : ' · active'}
                </span>
              </span>
              <span className="actions">
                <button type="button" disabled={pausing.fetching} onClick={() => void onPause(t)}>
                  {t.paused ? `Resume ${t.name}` : `Pause ${t.name}`}
                </button>{' '}
                <ConfirmButton
                  label={`Delete ${t.name}`}
                  question={`Delete ${t.name} and its run history?`}
                  confirmLabel="Delete trigger"
                  disabled={deleting.fetching}
                  onConfirm={() => void onDelete(t)}
                />
              </span>
            </div>
            {t.webhookUrl && (
              <p className="muted">
                POST deliveries to <span className="mono">{t.webhookUrl}</span>
              </p>
            )}
            {t.runs.edges.length === 0 ? (
              <p className="muted">No runs yet.</p>
            ) : (
              <ul aria-label={`Runs of ${t.name}`}>
                {t.runs.edges.map(({ node: r }) => (
                  <li key={r.id} data-run={r.status}>
                    {new Date(r.createdAt).toLocaleString()} · {r.status.toLowerCase().replaceAll('_', ' ')}
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
            )}
          </li>
        ))}
      </ul>
      <form className="create" onSubmit={submit}>
        <label>
          Trigger name
          <input name="triggerName" required value={name} onChange={(e) => setName(e.target.value)} />
        </label>
        <label>
          Kind
          <select name="triggerKind" value={kind} onChange={(e) => setKind(e.target.value as TriggerKind)}>
            <option value="SCHEDULE">schedule</option>
            <option value="WEBHOOK">webhook</option>
          </select>
        </label>
        {kind === 'SCHEDULE' && (
          <label>
            Schedule (cron, UTC)
            <input
              name="triggerSchedule"
              required
              className="mono"
              value={schedule}
              onChange={(e) => setSchedule(e.target.value)}
            />
          </label>
        )}
        <label className="wide">
          Trigger prompt
          <textarea
            name="triggerPrompt"
            rows={2}
            value={prompt}
            onChange={(e) => setPrompt(e.target.value)}
          />
        </label>
        <button type="submit" disabled={creating.fetching || name.trim() === ''}>
          Create trigger
        </button>
      </form>
      <ShownOnce what="the webhook signing key" value={webhookSecret} testId="webhook-secret" />
      <Problem problem={problem} />
    </section>
  );
}
