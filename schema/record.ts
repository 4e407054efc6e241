// The session record and the workspace read from the git mirror (R-REC-1, R-REC-2): Session.changes,
// Session.tree, Session.file, Session.recordUrl, deleteSession; Sandbox.ports, Sandbox.logTail and
// what a provider enforces; reportSandboxPorts for the daemon. Rules live in
// resolvers/sessions/record.ts, resolvers/sessions/workspace.ts and
// resolvers/sessions/sandbox-info.ts.
import { type Context, builder } from './builder';
import { COMMON_ERRORS } from './errors';
import { SandboxRef } from './sandboxes';
import type {
  FileChangeView,
  RepoFileView,
  SessionChangesView,
  TreeEntryView,
} from '../resolvers/sessions/workspace';

// --- the branch: changes, tree, file --------------------------------------------------------------

const FileChangeStatusEnum = builder.enumType('FileChangeStatus', {
  values: ['ADDED', 'MODIFIED', 'DELETED', 'RENAMED', 'COPIED', 'TYPE_CHANGED'] as const,
});

const FileChange = builder.objectRef<FileChangeView>('FileChange').implement({
  description: "One file the session's branch changed against its base.",
  fields: (t) => ({
    path: t.exposeString('path'),
    previousPath: t.exposeString('previousPath', { nullable: true, description: 'Renames and copies.' }),
    status: t.field({ type: FileChangeStatusEnum, resolve: (f) => f.status }),
    additions: t.exposeInt('additions'),
    deletions: t.exposeInt('deletions'),
    binary: t.exposeBoolean('binary'),
    patch: t.exposeString('patch', {
      nullable: true,
      description:
        "The file's unified diff (git diff, 3 lines of context); null for binary files. Cut at 256 KiB (patchTruncated).",
    }),
    patchTruncated: t.exposeBoolean('patchTruncated'),
  }),
});

const SessionChanges = builder.objectRef<SessionChangesView>('SessionChanges').implement({
  description:
    "The session branch's diff against the commit it was cut from, read from the server's git mirror (also after the session stopped).",
  fields: (t) => ({
    baseCommit: t.exposeString('baseCommit'),
    headCommit: t.exposeString('headCommit'),
    additions: t.exposeInt('additions'),
    deletions: t.exposeInt('deletions'),
    files: t.field({ type: [FileChange], resolve: (c) => c.files }),
  }),
});

const TreeEntryTypeEnum = builder.enumType('TreeEntryType', {
  values: ['FILE', 'DIRECTORY', 'SYMLINK', 'SUBMODULE'] as const,
});

const TreeEntry = builder.objectRef<TreeEntryView>('TreeEntry').implement({
  fields: (t) => ({
    path: t.exposeString('path', { description: 'From the repository root.' }),
    name: t.exposeString('name'),
    type: t.field({ type: TreeEntryTypeEnum, resolve: (e) => e.type }),
    sizeBytes: t.exposeFloat('sizeBytes', { nullable: true, description: 'Files only.' }),
  }),
});

const RepoFile = builder.objectRef<RepoFileView>('RepoFile').implement({
  description: "A file of the session's branch (read-only).",
  fields: (t) => ({
    path: t.exposeString('path'),
    commit: t.exposeString('commit'),
    sizeBytes: t.exposeFloat('sizeBytes'),
    binary: t.exposeBoolean('binary'),
    text: t.exposeString('text', {
      nullable: true,
      description: 'UTF-8 content; null for binary files. Cut at 1 MiB (truncated).',
    }),
    truncated: t.exposeBoolean('truncated'),
  }),
});

builder.prismaObjectFields('Session', (t) => ({
  changes: t.field({
    type: SessionChanges,
    nullable: true,
    description:
      "The branch's changes against its base commit, per file (null while the branch is not in the repository yet). `path` limits them to one file.",
    args: { path: t.arg.string({ required: false }) },
    select: { id: true, accountId: true },
    resolve: (session, args, ctx) =>
      ctx.services.workspace.changes(ctx.principal!, session.id, args.path ?? null),
  }),
  tree: t.field({
    type: [TreeEntry],
    nullable: true,
    description:
      "The entries of one directory of the session's branch (`path`: default the root), directories first; null when the branch or the directory does not exist.",
    args: { path: t.arg.string({ required: false }) },
    select: { id: true, accountId: true },
    resolve: (session, args, ctx) => ctx.services.workspace.tree(ctx.principal!, session.id, args.path ?? ''),
  }),
  file: t.field({
    type: RepoFile,
    nullable: true,
    description: "One file of the session's branch; null when it does not exist.",
    args: { path: t.arg.string() },
    select: { id: true, accountId: true },
    resolve: (session, args, ctx) => ctx.services.workspace.file(ctx.principal!, session.id, args.path),
  }),
  recordUrl: t.string({
    description:
      "URL of the session's record as one JSON document (every message and part; Authorization as for GraphQL).",
    select: { id: true },
    resolve: (session, _args, ctx) => ctx.services.record.documentUrl(session.id),
  }),
}));

// --- deleteSession --------------------------------------------------------------------------------

const DeleteSessionInput = builder.inputType('DeleteSessionInput', {
  fields: (t) => ({ sessionId: t.id({ description: 'Global id or UUID.' }) }),
});

builder.mutationField('deleteSession', (t) =>
  t.field({
    type: builder.objectRef<{ deletedSessionId: string }>('DeleteSessionSuccess').implement({
      fields: (f) => ({ deletedSessionId: f.exposeID('deletedSessionId', { description: 'The raw UUID.' }) }),
    }),
    description:
      "Deletes an ended session's (STOPPED or FAILED) record: its messages and parts, initial prompt, kept log tail, ports and telemetry; the user who created it or an account admin may. The session itself stays with its status, usage (billing), change requests and git branch; its messages are then empty.",
    authScopes: { human: true },
    errors: { types: COMMON_ERRORS },
    args: { input: t.arg({ type: DeleteSessionInput }) },
    resolve: (_root, { input }, ctx) =>
      ctx.services.record.deleteSession(ctx.principal!, { sessionId: String(input.sessionId) }),
  }),
);

// --- Sandbox: ports, log tail, limits -------------------------------------------------------------

/** One read of a sandbox's report per request, however many of its fields are selected. */
const reports = new WeakMap<Context, Map<string, ReturnType<Context['services']['sandboxInfo']['ports']>>>();
function portsOf(ctx: Context, sandboxId: string) {
  const byId = reports.get(ctx) ?? new Map();
  reports.set(ctx, byId);
  const report = byId.get(sandboxId) ?? ctx.services.sandboxInfo.ports(sandboxId);
  byId.set(sandboxId, report);
  return report;
}

builder.prismaObjectFields(SandboxRef, (t) => ({
  ports: t.intList({
    description:
      "TCP ports processes in the sandbox listen on, as its daemon last reported them (the daemon's and OpenCode's own excluded); empty once stopped.",
    select: { id: true },
    resolve: async (sandbox, _args, ctx) => (await portsOf(ctx, sandbox.id)).ports,
  }),
  portsReportedAt: t.field({
    type: 'DateTime',
    nullable: true,
    select: { id: true },
    resolve: async (sandbox, _args, ctx) => (await portsOf(ctx, sandbox.id)).reportedAt,
  }),
  logTail: t.string({
    nullable: true,
    description:
      "The last bytes (default 16 KiB, at most 256 KiB) of the sandbox entry process's output: live while the provider keeps the sandbox, the copy kept at stop or failure afterwards. null: nothing to show.",
    args: { maxBytes: t.arg.int({ required: false }) },
    select: { id: true, provider: true, providerSandboxId: true },
    resolve: (sandbox, args, ctx) => ctx.services.sandboxInfo.tail(sandbox, args.maxBytes ?? null),
  }),
  memoryLimitEnforced: t.boolean({
    description:
      'false when the provider does not enforce memoryGiB (LOCAL): telemetry then shows the host memory as the limit.',
    select: { provider: true },
    resolve: (sandbox, _args, ctx) => ctx.services.sandboxInfo.limitsEnforced(sandbox.provider).memory,
  }),
  cpuLimitEnforced: t.boolean({
    description: 'false when the provider does not enforce cpu (LOCAL).',
    select: { provider: true },
    resolve: (sandbox, _args, ctx) => ctx.services.sandboxInfo.limitsEnforced(sandbox.provider).cpu,
  }),
}));

// --- reportSandboxPorts (sandbox token) -----------------------------------------------------------

const ReportSandboxPortsInput = builder.inputType('ReportSandboxPortsInput', {
  fields: (t) => ({
    sandboxId: t.id(),
    ports: t.intList({ description: 'Every port listening now (the full set, not a change).' }),
  }),
});

builder.mutationField('reportSandboxPorts', (t) =>
  t.field({
    type: builder.objectRef<{ ports: number[] }>('ReportSandboxPortsSuccess').implement({
      fields: (f) => ({ ports: f.exposeIntList('ports') }),
    }),
    description: "The daemon reports its sandbox's listening ports when they change.",
    authScopes: { sandbox: true },
    errors: { types: COMMON_ERRORS },
    args: { input: t.arg({ type: ReportSandboxPortsInput }) },
    resolve: (_root, { input }, ctx) =>
      ctx.services.sandboxInfo.reportPorts(ctx.principal, {
        sandboxId: String(input.sandboxId),
        ports: input.ports,
      }),
  }),
);
