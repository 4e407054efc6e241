// The `singulacomp` command tree (R-CLI-1, R-GIT-3). Commands are thin: read options, call the API
// with the typed documents from contract/generated/cli.ts, print a table or (--json) JSON.
import { createInterface } from 'node:readline/promises';
import { Command, Option } from 'commander';
import { version } from '../package.json';
import {
  CliCreatePersonalAccessTokenDocument,
  CliCreateProjectDocument,
  CliSendMessageDocument,
  CliSyncProjectManifestDocument,
  type CliProjectFragment,
  CliCreateServiceAccountTokenDocument,
  CliCreateSessionDocument,
  CliMergeChangeRequestDocument,
  CliOpenChangeRequestDocument,
  CliProjectsDocument,
  CliRevokeTokenDocument,
  CliSessionDocument,
  CliSessionsDocument,
  CliStopSessionDocument,
  CliViewerDocument,
  type CliProjectsQuery,
  type SessionFieldsFragment,
} from '../contract/generated/cli';

type ProjectRow = CliProjectsQuery['viewer']['projects']['edges'][number]['node'];
import { type ApiClient, createApiClient, unwrap } from './client';
import { readStoredConfig, resolveConfig, writeStoredConfig } from './config';
import { type CliEnv, readCliEnv } from './env';
import { CliExit } from './errors';
import { formatTranscript, readMessages, waitForAgent, watchEvents } from './conversation';
import { gitCredential } from './git-credential';
import { plainView, runReload, silentView, terminalView } from './reload';

/** Where `npm start` serves the API: what `login` uses without --api-url. */
export const LOCAL_API_URL = 'http://127.0.0.1:4000';

export interface ProgramIo {
  env: CliEnv;
  stdin: NodeJS.ReadStream;
  stdout: NodeJS.WriteStream;
  stderr: NodeJS.WriteStream;
}

export { CliExit };

function table(rows: Array<Record<string, unknown>>, columns: string[]): string {
  if (rows.length === 0) return '(none)\n';
  const cell = (value: unknown) => (value === null || value === undefined ? '-' : String(value));
  const widths = columns.map((column) =>
    Math.max(column.length, ...rows.map((row) => cell(row[column]).length)),
  );
  const line = (values: string[]) =>
    values
      .map((value, i) => value.padEnd(widths[i] ?? 0))
      .join('  ')
      .trimEnd();
  return `${[line(columns.map((c) => c.toUpperCase())), ...rows.map((row) => line(columns.map((c) => cell(row[c]))))].join('\n')}\n`;
}

export function buildProgram(io: Partial<ProgramIo> = {}): Command {
  const env = io.env ?? readCliEnv();
  const stdin = io.stdin ?? process.stdin;
  const stdout = io.stdout ?? process.stdout;
  const stderr = io.stderr ?? process.stderr;

  const program = new Command('singulacomp')
    .description('SingulaComp control plane CLI')
    .version(version, '-V, --version', 'print the version')
    .option('--json', 'print JSON for scripts')
    .showHelpAfterError();
  const json = () => Boolean(program.opts().json);
  const print = (value: unknown, human: () => string) => {
    stdout.write(json() ? `${JSON.stringify(value, null, 2)}\n` : human());
  };
  const api = async (): Promise<ApiClient> => createApiClient(await resolveConfig(env));

  async function confirm(question: string, yes: boolean | undefined): Promise<void> {
    if (yes) return;
    if (!stdin.isTTY) throw new CliExit(`${question} Pass --yes to confirm when not on a terminal.`);
    const rl = createInterface({ input: stdin, output: stderr });
    try {
      const answer = (await rl.question(`${question} [y/N] `)).trim().toLowerCase();
      if (answer !== 'y' && answer !== 'yes') throw new CliExit('Aborted.');
    } finally {
      rl.close();
    }
  }

  program
    .command('login')
    .description('store an API URL and a personal access token (config file, mode 0600)')
    .option('--api-url <url>', `API base URL (default: ${LOCAL_API_URL}, the server \`npm start\` runs)`)
    .option('--token <pat>', 'personal access token (read from stdin when omitted)')
    .action(async (options: { apiUrl?: string; token?: string }) => {
      const stored = await readStoredConfig(env);
      const apiUrl = (options.apiUrl ?? env.apiUrl ?? stored.apiUrl ?? LOCAL_API_URL).replace(/\/+$/, '');
      let token = options.token;
      if (!token) {
        const rl = createInterface({ input: stdin, output: stderr, terminal: false });
        if (stdin.isTTY) stderr.write('Personal access token: ');
        token = (await rl[Symbol.asyncIterator]().next()).value?.trim();
        rl.close();
      }
      if (!token) {
        throw new CliExit(
          'No token given: pass --token or pipe one in (the local server writes its admin token to .data/bootstrap-token).',
        );
      }
      let viewer: { kind: string };
      try {
        viewer = (await createApiClient({ apiUrl, token }).request(CliViewerDocument, {})).viewer;
      } catch (error) {
        throw new CliExit(`Cannot log in to ${apiUrl}: ${(error as Error).message}`);
      }
      const path = await writeStoredConfig(env, { apiUrl, token });
      print(
        { apiUrl, kind: viewer.kind, configPath: path },
        () => `Logged in to ${apiUrl} (${viewer.kind}); saved to ${path}\n`,
      );
    });

  program
    .command('git-credential')
    .description('git credential helper: hands SINGULACOMP_TOKEN to the SingulaComp git proxy only')
    .argument('<operation>', 'get, store or erase')
    .action(async (operation: string) => {
      await gitCredential(operation, { apiUrl: env.apiUrl, token: env.token });
    });

  const projects = program.command('projects').description('projects of your account');
  projects
    .command('list')
    .description('list projects')
    .action(async () => {
      const client = await api();
      const rows: ProjectRow[] = [];
      let after: string | null | undefined = null;
      do {
        const page: CliProjectsQuery['viewer']['projects'] = (
          await client.request(CliProjectsDocument, { after })
        ).viewer.projects;
        rows.push(...page.edges.map((edge) => edge.node));
        after = page.pageInfo.hasNextPage ? page.pageInfo.endCursor : null;
      } while (after);
      print(rows, () =>
        table(
          rows.map((p) => ({ ...p, id: p.projectId })),
          ['id', 'name', 'defaultBranch', 'provider', 'repositoryUrl'],
        ),
      );
    });

  const printProject = (project: CliProjectFragment, intro: string) =>
    print(project, () => {
      const templates = project.templates.length
        ? project.templates
            .map(
              (t) =>
                `  ${t.slug}${t.isDefault ? ' (default)' : ''}: ${t.name}${t.warnings.length ? ` ⚠ ${t.warnings.join('; ')}` : ''}`,
            )
            .join('\n')
        : '  (none: the repository has no singulacomp.yaml; sessions use the platform image)';
      return `${intro} ${project.projectId} (${project.name}, ${project.defaultBranch} at ${project.manifestCommit?.slice(0, 12) ?? '-'})\nTemplates:\n${templates}\n`;
    });
  /** A payload's ManifestInvalidError as one line per problem. */
  const manifestProblems = (payload: { __typename: string }) => {
    const problems = (payload as { problems?: Array<{ field: string[]; message: string }> }).problems;
    if (payload.__typename !== 'ManifestInvalidError' || !problems) return;
    throw new CliExit(
      `The manifest is invalid:\n${problems.map((p) => `  ${p.field.join('.')}: ${p.message}`).join('\n')}`,
    );
  };

  projects
    .command('create')
    .description('create a project; its manifest (singulacomp.yaml) is read at once')
    .argument('<name>', 'project name')
    .argument('<repository>', 'git URL, or an absolute path to a local repository')
    .option('--default-branch <branch>', "default branch (default: main, else the repository's HEAD)")
    .addOption(
      new Option('--provider <provider>', 'sandbox provider').choices([
        'LOCAL',
        'DAYTONA',
        'E2B',
        'PLATINUM',
      ]),
    )
    .option('--git-credential <token>', 'upstream token, stored encrypted on the server')
    .action(
      async (
        name: string,
        repository: string,
        options: {
          defaultBranch?: string;
          provider?: 'LOCAL' | 'DAYTONA' | 'E2B' | 'PLATINUM';
          gitCredential?: string;
        },
      ) => {
        const client = await api();
        const payload = (
          await client.request(CliCreateProjectDocument, {
            input: {
              name,
              repositoryUrl: repository,
              defaultBranch: options.defaultBranch,
              provider: options.provider,
              gitCredential: options.gitCredential,
            },
          })
        ).createProject;
        manifestProblems(payload);
        printProject(unwrap(payload, 'CreateProjectSuccess').project, 'Project');
      },
    );

  projects
    .command('sync')
    .description("read the project's manifest again and update its templates")
    .argument('<id>', 'project id')
    .option('--ref <ref>', 'branch, tag or commit (default: the default branch)')
    .action(async (id: string, options: { ref?: string }) => {
      const client = await api();
      const payload = (
        await client.request(CliSyncProjectManifestDocument, { input: { projectId: id, ref: options.ref } })
      ).syncProjectManifest;
      manifestProblems(payload);
      printProject(unwrap(payload, 'SyncProjectManifestSuccess').project, 'Synced project');
    });

  const sessions = program.command('sessions').description('agent sessions');
  sessions
    .command('list')
    .description('list sessions')
    .option('--project <pid>', 'only this project')
    .addOption(
      new Option('--status <status>', 'only this status').choices([
        'PROVISIONING',
        'RUNNING',
        'STOPPED',
        'FAILED',
      ]),
    )
    .action(
      async (options: { project?: string; status?: 'PROVISIONING' | 'RUNNING' | 'STOPPED' | 'FAILED' }) => {
        const client = await api();
        const rows: SessionFieldsFragment[] = [];
        let after: string | null | undefined = null;
        do {
          const page = (
            await client.request(CliSessionsDocument, {
              projectId: options.project,
              status: options.status,
              after,
            })
          ).sessions as {
            edges: Array<{ node: SessionFieldsFragment }>;
            pageInfo: { hasNextPage: boolean; endCursor?: string | null };
          };
          rows.push(...page.edges.map((edge) => edge.node));
          after = page.pageInfo.hasNextPage ? page.pageInfo.endCursor : null;
        } while (after);
        print(rows, () =>
          table(
            rows.map((s) => ({ ...s, id: s.sessionId, project: s.project.name })),
            ['id', 'status', 'project', 'baseRef', 'agent', 'createdAt'],
          ),
        );
      },
    );

  sessions
    .command('create')
    .description('start a session on its own branch')
    .argument('[project]', 'project id (or --project)')
    .option('--project <pid>', 'project id')
    .option(
      '--base-ref <ref>',
      "branch, tag or commit to branch from (default: the project's default branch)",
    )
    .option('--template <slug>', 'template slug')
    .option('--prompt <text>', 'initial prompt')
    .option('--agent <name>', 'agent (default: build)')
    .option('--wait', 'return once the agent can take a turn (exit 1 if the session fails first)')
    .action(
      async (
        projectArg: string | undefined,
        options: {
          project?: string;
          baseRef?: string;
          template?: string;
          prompt?: string;
          agent?: string;
          wait?: boolean;
        },
      ) => {
        const projectId = projectArg ?? options.project;
        if (!projectId) throw new CliExit('Give the project id: singulacomp sessions create <project>.');
        const client = await api();
        let session = unwrap(
          (
            await client.request(CliCreateSessionDocument, {
              input: {
                projectId,
                baseRef: options.baseRef,
                templateSlug: options.template,
                prompt: options.prompt,
                agent: options.agent,
              },
            })
          ).createSession,
          'CreateSessionSuccess',
        ).session;
        if (options.wait) {
          if (!json()) stderr.write(`Session ${session.sessionId} created; waiting for its agent…\n`);
          session = await waitForAgent(client, session);
        }
        print(
          session,
          () =>
            `Session ${session.sessionId} ${session.status}${session.agentReady ? ', agent ready' : ''} on branch ${session.branchName}\n`,
        );
      },
    );

  sessions
    .command('send')
    .description('send the agent a message; with --wait, print its answer as it streams')
    .argument('<id>', 'session id')
    .argument('<message...>', 'the message (words are joined with spaces)')
    .option('--wait', 'follow the turn until it ends and print the answer')
    .action(async (id: string, words: string[], options: { wait?: boolean }) => {
      const client = await api();
      const text = words.join(' ');
      const send = async () => {
        const session = unwrap(
          (await client.request(CliSendMessageDocument, { input: { sessionId: id, text } })).sendMessage,
          'SendMessageSuccess',
        ).session;
        if (!options.wait) print(session, () => `Sent to session ${session.sessionId}.\n`);
      };
      if (!options.wait) return send();
      await watchEvents(client, id, {
        untilTurnEnds: true,
        write: (chunk) => {
          if (!json()) stdout.write(chunk);
        },
        onFollowing: send,
      });
      if (json()) {
        const messages = await readMessages(client, id);
        stdout.write(`${JSON.stringify(messages.at(-1) ?? null, null, 2)}\n`);
      }
    });

  sessions
    .command('logs')
    .description("print the session's conversation: messages, tool calls and their output")
    .argument('<id>', 'session id')
    .action(async (id: string) => {
      const client = await api();
      const messages = await readMessages(client, id);
      print(messages, () => formatTranscript(messages));
    });

  sessions
    .command('watch')
    .description("follow the session's agent live: streamed text, tool calls, turn states (Ctrl+C stops)")
    .argument('<id>', 'session id')
    .option('--from-start', 'replay the events so far first')
    .option('--until-idle', 'exit once a turn ends')
    .action(async (id: string, options: { fromStart?: boolean; untilIdle?: boolean }) => {
      const client = await api();
      await watchEvents(client, id, {
        ...(options.fromStart ? { after: 0 } : {}),
        untilTurnEnds: Boolean(options.untilIdle),
        write: (chunk) => stdout.write(chunk),
      });
    });

  sessions
    .command('stop')
    .description('stop a session')
    .argument('<id>', 'session id')
    .option('--yes', 'do not ask for confirmation')
    .action(async (id: string, options: { yes?: boolean }) => {
      const client = await api();
      await confirm(`Stop session ${id}?`, options.yes);
      const session = unwrap(
        (await client.request(CliStopSessionDocument, { input: { sessionId: id } })).stopSession,
        'StopSessionSuccess',
      ).session;
      print(session, () => `Session ${session.sessionId} ${session.status}\n`);
    });

  sessions
    .command('reload')
    .description("replace the session's agent runtime once the replacement is healthy; shows each phase live")
    .argument('<id>', 'session id')
    .option('--project <pid>', 'project the session belongs to (checked when given)')
    .option('--no-repo', 'do not refresh the repository (the branch was already reconciled)')
    .option('--force', 'end a running turn')
    .option('--yes', 'do not ask for confirmation')
    .action(
      async (id: string, options: { project?: string; repo: boolean; force?: boolean; yes?: boolean }) => {
        const client = await api();
        const session = (await client.request(CliSessionDocument, { id })).session;
        if (!session) throw new CliExit(`No session ${id}.`);
        // --project takes the raw UUID or the global id, like every id the API accepts.
        if (options.project && ![session.project.projectId, session.project.id].includes(options.project)) {
          throw new CliExit(
            `Session ${id} belongs to project ${session.project.projectId}, not ${options.project}.`,
          );
        }
        await confirm(
          `Reload the runtime of session ${session.sessionId}${options.force ? ' (ending the current turn)' : ''}?`,
          options.yes,
        );
        const view = json() ? silentView : stdout.isTTY ? terminalView(stdout) : plainView(stdout);
        const reload = await runReload(
          client,
          { sessionId: session.sessionId, noRepo: !options.repo, force: Boolean(options.force) },
          view,
        );
        if (json()) stdout.write(`${JSON.stringify(reload, null, 2)}\n`);
        if (reload.status !== 'SUCCEEDED')
          throw new CliExit(`reload ${reload.status}: ${reload.error ?? ''}`, 1);
      },
    );

  const changeRequests = program
    .command('change-requests')
    .description('land session branches on the default branch');
  changeRequests
    .command('open')
    .description("propose a session's branch for the default branch")
    .argument('[session]', 'session id (or --session)')
    .option('--session <id>', 'session id')
    .requiredOption('--title <text>', 'title')
    .option('--description <text>', 'description')
    .action(
      async (
        sessionArg: string | undefined,
        options: { session?: string; title: string; description?: string },
      ) => {
        const session = sessionArg ?? options.session;
        if (!session)
          throw new CliExit(
            'Give the session id: singulacomp change-requests open <session> --title <text>.',
          );
        const client = await api();
        const cr = unwrap(
          (
            await client.request(CliOpenChangeRequestDocument, {
              input: { sessionId: session, title: options.title, description: options.description },
            })
          ).openChangeRequest,
          'OpenChangeRequestSuccess',
        ).changeRequest;
        print(
          cr,
          () =>
            `Change request ${cr.changeRequestId} OPEN: ${cr.headRef} → ${cr.baseRef}, ${cr.filesChanged} files (+${cr.additions} -${cr.deletions})${cr.mergeable ? '' : `, conflicts in ${cr.conflicts.join(', ')}`}\n`,
        );
      },
    );

  changeRequests
    .command('merge')
    .description('merge a change request into the default branch')
    .argument('<id>', 'change request id')
    .addOption(
      new Option('--method <method>', 'merge method')
        .choices(['MERGE', 'SQUASH', 'FAST_FORWARD'])
        .default('MERGE'),
    )
    .option('--yes', 'do not ask for confirmation')
    .action(async (id: string, options: { method: 'MERGE' | 'SQUASH' | 'FAST_FORWARD'; yes?: boolean }) => {
      const client = await api();
      await confirm(`Merge change request ${id} with ${options.method}?`, options.yes);
      const cr = unwrap(
        (
          await client.request(CliMergeChangeRequestDocument, {
            input: { changeRequestId: id, method: options.method },
          })
        ).mergeChangeRequest,
        'MergeChangeRequestSuccess',
      ).changeRequest;
      print(cr, () => `Merged into ${cr.baseRef} at ${cr.mergeCommit}\n`);
    });

  const tokens = program.command('tokens').description('personal access and service-account tokens');
  tokens
    .command('create')
    .description('create a token; the secret is shown once')
    .requiredOption('--name <name>', 'token name (service account name with --service-account)')
    .requiredOption('--scopes <scopes>', 'comma-separated scopes, e.g. projects:read,sessions:write')
    .option('--service-account', 'create a service-account token instead of a personal one')
    .option('--expires-at <iso>', 'expiry, ISO-8601 with an offset (e.g. 2027-01-31T12:00:00Z)')
    .action(
      async (options: { name: string; scopes: string; serviceAccount?: boolean; expiresAt?: string }) => {
        const client = await api();
        const input = {
          name: options.name,
          scopes: options.scopes
            .split(',')
            .map((s) => s.trim())
            .filter(Boolean),
          expiresAt: options.expiresAt,
        };
        const created = options.serviceAccount
          ? unwrap(
              (await client.request(CliCreateServiceAccountTokenDocument, { input }))
                .createServiceAccountToken,
              'CreateTokenSuccess',
            )
          : unwrap(
              (await client.request(CliCreatePersonalAccessTokenDocument, { input }))
                .createPersonalAccessToken,
              'CreateTokenSuccess',
            );
        print(
          { secret: created.secret, token: created.token },
          () => `Token ${created.token.id} created. Secret (shown once):\n${created.secret}\n`,
        );
      },
    );

  tokens
    .command('revoke')
    .description('revoke a token')
    .argument('<id>', 'token id')
    .option('--yes', 'do not ask for confirmation')
    .action(async (id: string, options: { yes?: boolean }) => {
      const client = await api();
      await confirm(`Revoke token ${id}?`, options.yes);
      const token = unwrap(
        (await client.request(CliRevokeTokenDocument, { input: { tokenId: id } })).revokeToken,
        'RevokeTokenSuccess',
      ).token;
      print(token, () => `Token ${token.id} revoked at ${token.revokedAt}\n`);
    });

  return program;
}
