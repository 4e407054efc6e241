import type { TypedDocumentNode as DocumentNode } from '@graphql-typed-document-node/core';
export type Maybe<T> = T | null;
export type InputMaybe<T> = Maybe<T>;
export type Exact<T extends { [key: string]: unknown }> = { [K in keyof T]: T[K] };
export type MakeOptional<T, K extends keyof T> = Omit<T, K> & { [SubKey in K]?: Maybe<T[SubKey]> };
export type MakeMaybe<T, K extends keyof T> = Omit<T, K> & { [SubKey in K]: Maybe<T[SubKey]> };
export type MakeEmpty<T extends { [key: string]: unknown }, K extends keyof T> = { [_ in K]?: never };
export type Incremental<T> = T | { [P in keyof T]?: P extends ' $fragmentName' | '__typename' ? T[P] : never };
/** All built-in and custom scalars, mapped to their actual values */
export type Scalars = {
  ID: { input: string; output: string; }
  String: { input: string; output: string; }
  Boolean: { input: boolean; output: boolean; }
  Int: { input: number; output: number; }
  Float: { input: number; output: number; }
  /** An ISO-8601 instant in UTC, e.g. 2026-01-31T12:00:00.000Z. */
  DateTime: { input: string; output: string; }
};

export type AbortTurnInput = {
  /** Global id or UUID. */
  sessionId: Scalars['ID']['input'];
};

export type AbortTurnPayload = AbortTurnSuccess | AgentUnavailableError | ConflictError | NotFoundError | ValidationError;

export type AbortTurnSuccess = {
  __typename?: 'AbortTurnSuccess';
  /** Whether a turn was running. */
  aborted: Scalars['Boolean']['output'];
  session: Session;
};

export type Account = {
  __typename?: 'Account';
  /** Effective limit: the account override, else the tier default. */
  concurrentSessionLimit: Scalars['Int']['output'];
  id: Scalars['ID']['output'];
  /** Sessions counting against the limit now (PROVISIONING or RUNNING). */
  liveSessionCount: Scalars['Int']['output'];
  /** Every user of the account, oldest first. */
  members: Array<User>;
  name: Scalars['String']['output'];
  tier: AccountTier;
};

export type AccountTier =
  | 'ENTERPRISE'
  | 'FREE'
  | 'PRO'
  | 'TEAM';

/** Metered sandbox time (running intervals clipped to the range) and its cost. */
export type AccountUsage = {
  __typename?: 'AccountUsage';
  /** Only TEAM accounts are billed (R-SBX-5). */
  billable: Scalars['Boolean']['output'];
  /** What the account is charged: 0 unless TEAM. */
  billedUsd: Scalars['Float']['output'];
  /** Computed for every account. */
  costUsd: Scalars['Float']['output'];
  from: Scalars['DateTime']['output'];
  providers: Array<ProviderUsage>;
  seconds: Scalars['Float']['output'];
  tier: AccountTier;
  to: Scalars['DateTime']['output'];
};

export type AddMemberPayload = AddMemberSuccess | ConflictError | NotFoundError | ValidationError;

export type AddMemberSuccess = {
  __typename?: 'AddMemberSuccess';
  member: User;
  /** The member's first personal access token. Shown once; only its hash is stored. */
  secret: Scalars['String']['output'];
};

/** One event of the session's agent; `seq` is the value to resume from (`after`). */
export type AgentEvent = {
  __typename?: 'AgentEvent';
  /** TEXT_DELTA: the text appended to the part. */
  delta: Maybe<Scalars['String']['output']>;
  error: Maybe<Scalars['String']['output']>;
  kind: AgentEventKind;
  messageId: Maybe<Scalars['String']['output']>;
  opencodeSessionId: Maybe<Scalars['String']['output']>;
  part: Maybe<MessagePart>;
  partId: Maybe<Scalars['String']['output']>;
  role: Maybe<Scalars['String']['output']>;
  seq: Scalars['Int']['output'];
  turnState: Maybe<TurnState>;
};

export type AgentEventKind =
  | 'MESSAGE_UPDATED'
  | 'PART_UPDATED'
  | 'TEXT_DELTA'
  | 'TOOL_CALL'
  | 'TURN_STATE';

export type AgentMessage = {
  __typename?: 'AgentMessage';
  createdAt: Maybe<Scalars['DateTime']['output']>;
  error: Maybe<Scalars['String']['output']>;
  id: Scalars['String']['output'];
  parts: Array<MessagePart>;
  /** user or assistant. */
  role: Scalars['String']['output'];
  /** The text parts joined. */
  text: Scalars['String']['output'];
};

export type AgentMessageConnection = {
  __typename?: 'AgentMessageConnection';
  edges: Array<AgentMessageEdge>;
  pageInfo: PageInfo;
};

export type AgentMessageEdge = {
  __typename?: 'AgentMessageEdge';
  cursor: Scalars['String']['output'];
  node: AgentMessage;
};

/** The session's agent cannot take the request now (daemon unreachable or OpenCode down); retry. */
export type AgentUnavailableError = Error & {
  __typename?: 'AgentUnavailableError';
  code: Scalars['String']['output'];
  /** Path of the input field at fault. */
  field: Maybe<Array<Scalars['String']['output']>>;
  message: Scalars['String']['output'];
};

/** baseRef does not exist in the repository. */
export type BaseRefNotFoundError = Error & {
  __typename?: 'BaseRefNotFoundError';
  code: Scalars['String']['output'];
  /** Path of the input field at fault. */
  field: Maybe<Array<Scalars['String']['output']>>;
  message: Scalars['String']['output'];
};

export type ChangeRequest = Node & {
  __typename?: 'ChangeRequest';
  additions: Scalars['Int']['output'];
  baseCommit: Scalars['String']['output'];
  /** The default branch it lands on. */
  baseRef: Scalars['String']['output'];
  /** The raw UUID. */
  changeRequestId: Scalars['String']['output'];
  closedAt: Maybe<Scalars['DateTime']['output']>;
  conflicts: Array<Scalars['String']['output']>;
  createdAt: Scalars['DateTime']['output'];
  deletions: Scalars['Int']['output'];
  description: Scalars['String']['output'];
  filesChanged: Scalars['Int']['output'];
  headCommit: Scalars['String']['output'];
  /** The session branch. */
  headRef: Scalars['String']['output'];
  id: Scalars['ID']['output'];
  mergeCommit: Maybe<Scalars['String']['output']>;
  mergeMethod: Maybe<MergeMethod>;
  /** As of the last open or merge attempt. */
  mergeable: Scalars['Boolean']['output'];
  mergedAt: Maybe<Scalars['DateTime']['output']>;
  project: Project;
  session: Session;
  status: ChangeRequestStatus;
  title: Scalars['String']['output'];
  updatedAt: Scalars['DateTime']['output'];
};

export type ChangeRequestStatus =
  | 'CLOSED'
  | 'MERGED'
  | 'OPEN';

export type ClaimBootstrapPayload = ClaimBootstrapSuccess | ConflictError | NotFoundError | ValidationError;

/** prompt and turnLedgerId are returned on the first claim only. */
export type ClaimBootstrapSuccess = {
  __typename?: 'ClaimBootstrapSuccess';
  agent: Scalars['String']['output'];
  alreadyClaimed: Scalars['Boolean']['output'];
  prompt: Maybe<Scalars['String']['output']>;
  sandboxId: Scalars['String']['output'];
  sessionId: Scalars['String']['output'];
  turnLedgerId: Maybe<Scalars['String']['output']>;
};

export type CloseChangeRequestInput = {
  changeRequestId: Scalars['ID']['input'];
};

export type CloseChangeRequestPayload = CloseChangeRequestSuccess | ConflictError | NotFoundError | ValidationError;

export type CloseChangeRequestSuccess = {
  __typename?: 'CloseChangeRequestSuccess';
  changeRequest: ChangeRequest;
};

/** The request conflicts with current state. */
export type ConflictError = Error & {
  __typename?: 'ConflictError';
  code: Scalars['String']['output'];
  /** Path of the input field at fault. */
  field: Maybe<Array<Scalars['String']['output']>>;
  message: Scalars['String']['output'];
};

export type CreateAccountInput = {
  /** The account's first admin (role is ignored). */
  admin: NewMemberInput;
  name: Scalars['String']['input'];
  /** Default: FREE. */
  tier?: InputMaybe<AccountTier>;
};

export type CreateAccountPayload = ConflictError | CreateAccountSuccess | NotFoundError | ValidationError;

export type CreateAccountSuccess = {
  __typename?: 'CreateAccountSuccess';
  account: Account;
  admin: User;
  /** The admin's first personal access token. Shown once; only its hash is stored. */
  secret: Scalars['String']['output'];
};

export type CreateProjectInput = {
  defaultBranch?: InputMaybe<Scalars['String']['input']>;
  /** Upstream token, stored encrypted server-side. */
  gitCredential?: InputMaybe<Scalars['String']['input']>;
  name: Scalars['String']['input'];
  provider?: InputMaybe<Provider>;
  /** Any git URL or an absolute local path. */
  repositoryUrl: Scalars['String']['input'];
};

export type CreateProjectPayload = ConflictError | CreateProjectSuccess | NotFoundError | ValidationError;

export type CreateProjectSuccess = {
  __typename?: 'CreateProjectSuccess';
  project: Project;
};

export type CreateSessionInput = {
  /** Default: build. */
  agent?: InputMaybe<Scalars['String']['input']>;
  /** Default: the project's default branch. */
  baseRef?: InputMaybe<Scalars['String']['input']>;
  projectId: Scalars['ID']['input'];
  prompt?: InputMaybe<Scalars['String']['input']>;
  /** Default: the manifest's default template. */
  templateSlug?: InputMaybe<Scalars['String']['input']>;
};

export type CreateSessionPayload = BaseRefNotFoundError | ConflictError | CreateSessionSuccess | NotFoundError | RepositoryUnreachableError | ValidationError;

export type CreateSessionSuccess = {
  __typename?: 'CreateSessionSuccess';
  session: Session;
};

export type CreateShareLinkInput = {
  expiresAt: Scalars['DateTime']['input'];
  mode: ShareLinkMode;
  port: Scalars['Int']['input'];
  /** Global id or UUID. */
  sandboxId: Scalars['ID']['input'];
};

export type CreateShareLinkPayload = ConflictError | CreateShareLinkSuccess | NotFoundError | ValidationError;

export type CreateShareLinkSuccess = {
  __typename?: 'CreateShareLinkSuccess';
  shareLink: ShareLink;
  /** The public URL (shown once; only its hash is stored). */
  url: Scalars['String']['output'];
};

export type CreateTokenInput = {
  expiresAt?: InputMaybe<Scalars['DateTime']['input']>;
  /** For service-account tokens, also the service account name. */
  name: Scalars['String']['input'];
  scopes: Array<Scalars['String']['input']>;
};

export type CreateTokenPayload = ConflictError | CreateTokenSuccess | NotFoundError | ValidationError;

export type CreateTokenSuccess = {
  __typename?: 'CreateTokenSuccess';
  /** The token itself. Shown once; only its hash is stored. */
  secret: Scalars['String']['output'];
  token: Token;
};

export type CreateTriggerInput = {
  agent?: InputMaybe<Scalars['String']['input']>;
  /** Default: the project's default branch at fire time. */
  baseRef?: InputMaybe<Scalars['String']['input']>;
  kind: TriggerKind;
  name: Scalars['String']['input'];
  projectId: Scalars['ID']['input'];
  prompt?: InputMaybe<Scalars['String']['input']>;
  /** Cron expression, UTC; required for SCHEDULE. */
  schedule?: InputMaybe<Scalars['String']['input']>;
  templateSlug?: InputMaybe<Scalars['String']['input']>;
};

export type CreateTriggerPayload = ConflictError | CreateTriggerSuccess | NotFoundError | ValidationError;

export type CreateTriggerSuccess = {
  __typename?: 'CreateTriggerSuccess';
  trigger: Trigger;
  /** HMAC-SHA256 key of a WEBHOOK trigger. Shown once. */
  webhookSecret: Maybe<Scalars['String']['output']>;
};

export type DeleteSecretInput = {
  name: Scalars['String']['input'];
  projectId: Scalars['ID']['input'];
};

export type DeleteSecretPayload = ConflictError | DeleteSecretSuccess | NotFoundError | ValidationError;

export type DeleteSecretSuccess = {
  __typename?: 'DeleteSecretSuccess';
  deletedName: Scalars['String']['output'];
  project: Project;
};

export type DeleteTriggerInput = {
  triggerId: Scalars['ID']['input'];
};

export type DeleteTriggerPayload = ConflictError | DeleteTriggerSuccess | NotFoundError | ValidationError;

export type DeleteTriggerSuccess = {
  __typename?: 'DeleteTriggerSuccess';
  triggerId: Scalars['String']['output'];
};

/** Implemented by every expected failure a mutation can return in its payload union. */
export type Error = {
  code: Scalars['String']['output'];
  /** Path of the input field at fault. */
  field: Maybe<Array<Scalars['String']['output']>>;
  message: Scalars['String']['output'];
};

export type ExecutionLease = {
  __typename?: 'ExecutionLease';
  acquiredAt: Scalars['DateTime']['output'];
  expiresAt: Scalars['DateTime']['output'];
  generation: Scalars['Int']['output'];
  /** Held and not expired: the idle reaper leaves the sandbox alone. */
  live: Scalars['Boolean']['output'];
  releasedAt: Maybe<Scalars['DateTime']['output']>;
  renewedAt: Scalars['DateTime']['output'];
};

export type FieldProblem = {
  __typename?: 'FieldProblem';
  field: Array<Scalars['String']['output']>;
  message: Scalars['String']['output'];
};

/** The lease generation is no longer current. */
export type LeaseFencedError = Error & {
  __typename?: 'LeaseFencedError';
  code: Scalars['String']['output'];
  /** Path of the input field at fault. */
  field: Maybe<Array<Scalars['String']['output']>>;
  message: Scalars['String']['output'];
};

/** Token usage of a session's calls through the LLM gateway, from the upstream's usage fields. */
export type LlmUsage = {
  __typename?: 'LlmUsage';
  inputTokens: Scalars['Float']['output'];
  outputTokens: Scalars['Float']['output'];
  requests: Scalars['Int']['output'];
};

/** The manifest is missing or invalid; problems lists every field at fault. */
export type ManifestInvalidError = Error & {
  __typename?: 'ManifestInvalidError';
  code: Scalars['String']['output'];
  /** Path of the input field at fault. */
  field: Maybe<Array<Scalars['String']['output']>>;
  message: Scalars['String']['output'];
  problems: Array<FieldProblem>;
};

export type MergeChangeRequestInput = {
  changeRequestId: Scalars['ID']['input'];
  method: MergeMethod;
};

export type MergeChangeRequestPayload = ConflictError | MergeChangeRequestSuccess | MergeConflictError | NotFastForwardError | NotFoundError | RepositoryUnreachableError | ValidationError;

export type MergeChangeRequestSuccess = {
  __typename?: 'MergeChangeRequestSuccess';
  changeRequest: ChangeRequest;
};

/** Merging would conflict; nothing was changed. */
export type MergeConflictError = Error & {
  __typename?: 'MergeConflictError';
  code: Scalars['String']['output'];
  conflicts: Array<Scalars['String']['output']>;
  /** Path of the input field at fault. */
  field: Maybe<Array<Scalars['String']['output']>>;
  message: Scalars['String']['output'];
};

export type MergeMethod =
  | 'FAST_FORWARD'
  | 'MERGE'
  | 'SQUASH';

/** One part of a message: text, reasoning, a tool call with its state, or a file. */
export type MessagePart = {
  __typename?: 'MessagePart';
  filename: Maybe<Scalars['String']['output']>;
  id: Scalars['String']['output'];
  mime: Maybe<Scalars['String']['output']>;
  text: Maybe<Scalars['String']['output']>;
  title: Maybe<Scalars['String']['output']>;
  tool: Maybe<Scalars['String']['output']>;
  toolCallId: Maybe<Scalars['String']['output']>;
  toolError: Maybe<Scalars['String']['output']>;
  /** The tool input as JSON. */
  toolInput: Maybe<Scalars['String']['output']>;
  toolOutput: Maybe<Scalars['String']['output']>;
  /** pending, running, completed or error. */
  toolStatus: Maybe<Scalars['String']['output']>;
  /** OpenCode part type: text, reasoning, tool, file, step-start, … */
  type: Scalars['String']['output'];
  /** Attachments: a URL on this API serving the bytes (Authorization as for GraphQL). */
  url: Maybe<Scalars['String']['output']>;
};

export type Mutation = {
  __typename?: 'Mutation';
  abortTurn: AbortTurnPayload;
  /** Account admins: a new user in the caller's account, with a first token (shown once). */
  addMember: AddMemberPayload;
  claimBootstrap: ClaimBootstrapPayload;
  closeChangeRequest: CloseChangeRequestPayload;
  /** Instance admin only: a new account with its first admin. */
  createAccount: CreateAccountPayload;
  createPersonalAccessToken: CreateTokenPayload;
  createProject: CreateProjectPayload;
  createServiceAccountToken: CreateTokenPayload;
  createSession: CreateSessionPayload;
  createShareLink: CreateShareLinkPayload;
  createTrigger: CreateTriggerPayload;
  deleteSecret: DeleteSecretPayload;
  deleteTrigger: DeleteTriggerPayload;
  /** Merges into the default branch upstream: the only way the default branch is written. */
  mergeChangeRequest: MergeChangeRequestPayload;
  /** Proposes a session's branch for the default branch (the session's sandbox may open its own). */
  openChangeRequest: OpenChangeRequestPayload;
  pauseTrigger: PauseTriggerPayload;
  releaseLease: ReleaseLeasePayload;
  /** Users with sessions:write, or the session’s own sandbox token. */
  reloadSession: ReloadSessionPayload;
  /** Account admins: removes a user and revokes their tokens; their sessions stay. */
  removeMember: RemoveMemberPayload;
  renewLease: RenewLeasePayload;
  reportAgentEvents: ReportAgentEventsPayload;
  reportReloadPhase: ReportReloadPhasePayload;
  reportRuntimeState: ReportRuntimeStatePayload;
  reportTelemetry: ReportTelemetryPayload;
  revokeShareLink: RevokeShareLinkPayload;
  revokeToken: RevokeTokenPayload;
  /** Delivers a user message to the session's agent and starts a turn; follow it on sessionEvents. */
  sendMessage: SendMessagePayload;
  setSecret: SetSecretPayload;
  stopSession: StopSessionPayload;
  syncProjectManifest: SyncProjectManifestPayload;
  updateAccount: UpdateAccountPayload;
  updateTrigger: UpdateTriggerPayload;
};


export type MutationAbortTurnArgs = {
  input: AbortTurnInput;
};


export type MutationAddMemberArgs = {
  input: NewMemberInput;
};


export type MutationCloseChangeRequestArgs = {
  input: CloseChangeRequestInput;
};


export type MutationCreateAccountArgs = {
  input: CreateAccountInput;
};


export type MutationCreatePersonalAccessTokenArgs = {
  input: CreateTokenInput;
};


export type MutationCreateProjectArgs = {
  input: CreateProjectInput;
};


export type MutationCreateServiceAccountTokenArgs = {
  input: CreateTokenInput;
};


export type MutationCreateSessionArgs = {
  input: CreateSessionInput;
};


export type MutationCreateShareLinkArgs = {
  input: CreateShareLinkInput;
};


export type MutationCreateTriggerArgs = {
  input: CreateTriggerInput;
};


export type MutationDeleteSecretArgs = {
  input: DeleteSecretInput;
};


export type MutationDeleteTriggerArgs = {
  input: DeleteTriggerInput;
};


export type MutationMergeChangeRequestArgs = {
  input: MergeChangeRequestInput;
};


export type MutationOpenChangeRequestArgs = {
  input: OpenChangeRequestInput;
};


export type MutationPauseTriggerArgs = {
  input: PauseTriggerInput;
};


export type MutationReleaseLeaseArgs = {
  input: ReleaseLeaseInput;
};


export type MutationReloadSessionArgs = {
  input: ReloadSessionInput;
};


export type MutationRemoveMemberArgs = {
  input: RemoveMemberInput;
};


export type MutationRenewLeaseArgs = {
  input: RenewLeaseInput;
};


export type MutationReportAgentEventsArgs = {
  input: ReportAgentEventsInput;
};


export type MutationReportReloadPhaseArgs = {
  input: ReportReloadPhaseInput;
};


export type MutationReportRuntimeStateArgs = {
  input: ReportRuntimeStateInput;
};


export type MutationReportTelemetryArgs = {
  input: ReportTelemetryInput;
};


export type MutationRevokeShareLinkArgs = {
  input: RevokeShareLinkInput;
};


export type MutationRevokeTokenArgs = {
  input: RevokeTokenInput;
};


export type MutationSendMessageArgs = {
  input: SendMessageInput;
};


export type MutationSetSecretArgs = {
  input: SetSecretInput;
};


export type MutationStopSessionArgs = {
  input: StopSessionInput;
};


export type MutationSyncProjectManifestArgs = {
  input: SyncProjectManifestInput;
};


export type MutationUpdateAccountArgs = {
  input: UpdateAccountInput;
};


export type MutationUpdateTriggerArgs = {
  input: UpdateTriggerInput;
};

export type NewMemberInput = {
  email: Scalars['String']['input'];
  name: Scalars['String']['input'];
  /** Default: MEMBER. */
  role?: InputMaybe<UserRole>;
};

export type Node = {
  id: Scalars['ID']['output'];
};

/** FAST_FORWARD was asked but the default branch has commits the session branch lacks. */
export type NotFastForwardError = Error & {
  __typename?: 'NotFastForwardError';
  code: Scalars['String']['output'];
  /** Path of the input field at fault. */
  field: Maybe<Array<Scalars['String']['output']>>;
  message: Scalars['String']['output'];
};

/** An id names nothing the caller can see. */
export type NotFoundError = Error & {
  __typename?: 'NotFoundError';
  code: Scalars['String']['output'];
  /** Path of the input field at fault. */
  field: Maybe<Array<Scalars['String']['output']>>;
  message: Scalars['String']['output'];
};

export type OpenChangeRequestInput = {
  description?: InputMaybe<Scalars['String']['input']>;
  /** Global id or UUID of the session whose branch is proposed. */
  sessionId: Scalars['ID']['input'];
  title: Scalars['String']['input'];
};

export type OpenChangeRequestPayload = ConflictError | NotFoundError | OpenChangeRequestSuccess | RepositoryUnreachableError | ValidationError;

export type OpenChangeRequestSuccess = {
  __typename?: 'OpenChangeRequestSuccess';
  changeRequest: ChangeRequest;
};

export type PageInfo = {
  __typename?: 'PageInfo';
  endCursor: Maybe<Scalars['String']['output']>;
  hasNextPage: Scalars['Boolean']['output'];
  hasPreviousPage: Scalars['Boolean']['output'];
  startCursor: Maybe<Scalars['String']['output']>;
};

export type PauseTriggerInput = {
  /** true pauses, false resumes. */
  paused: Scalars['Boolean']['input'];
  triggerId: Scalars['ID']['input'];
};

export type PauseTriggerPayload = ConflictError | NotFoundError | PauseTriggerSuccess | ValidationError;

export type PauseTriggerSuccess = {
  __typename?: 'PauseTriggerSuccess';
  trigger: Trigger;
};

export type PreviewForm =
  /** /v1/p/<sandbox-id>/<port>/ on the API host; supports WebSocket upgrades. */
  | 'PATH'
  /** p<port>-<sandbox-id>.<api-host>; for apps needing root-relative paths. HTTP only. */
  | 'SUBDOMAIN';

/** A signed URL; opening it sets a cookie scoped to this preview, so a browser needs no token. */
export type PreviewUrl = {
  __typename?: 'PreviewUrl';
  /** Open the URL before this instant. */
  expiresAt: Scalars['DateTime']['output'];
  url: Scalars['String']['output'];
};

export type Project = Node & {
  __typename?: 'Project';
  changeRequests: ProjectChangeRequestsConnection;
  createdAt: Scalars['DateTime']['output'];
  defaultBranch: Scalars['String']['output'];
  hasGitCredential: Scalars['Boolean']['output'];
  id: Scalars['ID']['output'];
  manifestCommit: Maybe<Scalars['String']['output']>;
  manifestSyncedAt: Maybe<Scalars['DateTime']['output']>;
  name: Scalars['String']['output'];
  /** The raw UUID. */
  projectId: Scalars['String']['output'];
  provider: Provider;
  repositoryUrl: Scalars['String']['output'];
  /** Names and flags only; values are write-only. */
  secrets: Array<ProjectSecret>;
  /** The project's sessions, newest first (needs sessions:read). */
  sessions: ProjectSessionConnection;
  templates: Array<Template>;
  triggers: ProjectTriggersConnection;
};


export type ProjectChangeRequestsArgs = {
  after?: InputMaybe<Scalars['String']['input']>;
  before?: InputMaybe<Scalars['String']['input']>;
  first?: InputMaybe<Scalars['Int']['input']>;
  last?: InputMaybe<Scalars['Int']['input']>;
  status?: InputMaybe<ChangeRequestStatus>;
};


export type ProjectSessionsArgs = {
  after?: InputMaybe<Scalars['String']['input']>;
  before?: InputMaybe<Scalars['String']['input']>;
  first?: InputMaybe<Scalars['Int']['input']>;
  last?: InputMaybe<Scalars['Int']['input']>;
};


export type ProjectTriggersArgs = {
  after?: InputMaybe<Scalars['String']['input']>;
  before?: InputMaybe<Scalars['String']['input']>;
  first?: InputMaybe<Scalars['Int']['input']>;
  last?: InputMaybe<Scalars['Int']['input']>;
};

export type ProjectChangeRequestsConnection = {
  __typename?: 'ProjectChangeRequestsConnection';
  edges: Array<ProjectChangeRequestsConnectionEdge>;
  pageInfo: PageInfo;
};

export type ProjectChangeRequestsConnectionEdge = {
  __typename?: 'ProjectChangeRequestsConnectionEdge';
  cursor: Scalars['String']['output'];
  node: ChangeRequest;
};

export type ProjectConnection = {
  __typename?: 'ProjectConnection';
  edges: Array<ProjectEdge>;
  pageInfo: PageInfo;
};

export type ProjectEdge = {
  __typename?: 'ProjectEdge';
  cursor: Scalars['String']['output'];
  node: Project;
};

/** A project secret. The value is write-only and never returned. */
export type ProjectSecret = {
  __typename?: 'ProjectSecret';
  name: Scalars['String']['output'];
  runtimeDelivery: Scalars['Boolean']['output'];
  updatedAt: Scalars['DateTime']['output'];
};

export type ProjectSessionConnection = {
  __typename?: 'ProjectSessionConnection';
  edges: Array<ProjectSessionEdge>;
  pageInfo: PageInfo;
};

export type ProjectSessionEdge = {
  __typename?: 'ProjectSessionEdge';
  cursor: Scalars['String']['output'];
  node: Session;
};

export type ProjectTriggersConnection = {
  __typename?: 'ProjectTriggersConnection';
  edges: Array<ProjectTriggersConnectionEdge>;
  pageInfo: PageInfo;
};

export type ProjectTriggersConnectionEdge = {
  __typename?: 'ProjectTriggersConnectionEdge';
  cursor: Scalars['String']['output'];
  node: Trigger;
};

export type Provider =
  | 'DAYTONA'
  | 'E2B'
  | 'LOCAL'
  | 'PLATINUM';

export type ProviderUsage = {
  __typename?: 'ProviderUsage';
  /** costUsd for TEAM accounts, else 0. */
  billedUsd: Scalars['Float']['output'];
  costUsd: Scalars['Float']['output'];
  provider: Provider;
  /** Sandboxes that ran inside the range. */
  sandboxCount: Scalars['Int']['output'];
  /** Running seconds inside the range. */
  seconds: Scalars['Float']['output'];
};

export type ProvisioningPhase =
  | 'CREATING_SANDBOX'
  | 'PREPARING_IMAGE'
  | 'STARTING';

export type Query = {
  __typename?: 'Query';
  /** Usage of the viewer's account in [from, to). */
  accountUsage: AccountUsage;
  node: Maybe<Node>;
  /** At most 100 ids per request. */
  nodes: Array<Maybe<Node>>;
  project: Maybe<Project>;
  sandbox: Maybe<Sandbox>;
  /** Accepts the global id or the raw session UUID. */
  session: Maybe<Session>;
  sessions: SessionConnection;
  viewer: Viewer;
};


export type QueryAccountUsageArgs = {
  from: Scalars['DateTime']['input'];
  to: Scalars['DateTime']['input'];
};


export type QueryNodeArgs = {
  id: Scalars['ID']['input'];
};


export type QueryNodesArgs = {
  ids: Array<Scalars['ID']['input']>;
};


export type QueryProjectArgs = {
  id: Scalars['ID']['input'];
};


export type QuerySandboxArgs = {
  id: Scalars['ID']['input'];
};


export type QuerySessionArgs = {
  id: Scalars['ID']['input'];
};


export type QuerySessionsArgs = {
  after?: InputMaybe<Scalars['String']['input']>;
  before?: InputMaybe<Scalars['String']['input']>;
  first?: InputMaybe<Scalars['Int']['input']>;
  last?: InputMaybe<Scalars['Int']['input']>;
  projectId?: InputMaybe<Scalars['ID']['input']>;
  status?: InputMaybe<SessionStatus>;
};

export type ReleaseLeaseInput = {
  generation: Scalars['Int']['input'];
  sessionId: Scalars['ID']['input'];
};

export type ReleaseLeasePayload = ConflictError | LeaseFencedError | NotFoundError | ReleaseLeaseSuccess | ValidationError;

export type ReleaseLeaseSuccess = {
  __typename?: 'ReleaseLeaseSuccess';
  lease: ExecutionLease;
};

export type Reload = Node & {
  __typename?: 'Reload';
  createdAt: Scalars['DateTime']['output'];
  error: Maybe<Scalars['String']['output']>;
  finishedAt: Maybe<Scalars['DateTime']['output']>;
  force: Scalars['Boolean']['output'];
  id: Scalars['ID']['output'];
  noRepo: Scalars['Boolean']['output'];
  phases: Array<ReloadPhase>;
  session: Session;
  status: ReloadStatus;
};

export type ReloadConnection = {
  __typename?: 'ReloadConnection';
  edges: Array<ReloadEdge>;
  pageInfo: PageInfo;
};

export type ReloadEdge = {
  __typename?: 'ReloadEdge';
  cursor: Scalars['String']['output'];
  node: Reload;
};

export type ReloadPhase = {
  __typename?: 'ReloadPhase';
  at: Scalars['DateTime']['output'];
  message: Maybe<Scalars['String']['output']>;
  name: ReloadPhaseName;
  status: ReloadPhaseStatus;
};

export type ReloadPhaseName =
  | 'APPLY_RUNTIME'
  | 'CHECK_SESSION'
  | 'COMPILE_AGENT_CONFIG'
  | 'CONFIRM_CONFIG'
  | 'REFRESH_REPOSITORY'
  | 'VALIDATE_RUNTIME';

export type ReloadPhaseStatus =
  | 'FAILED'
  | 'STARTED'
  | 'SUCCEEDED';

export type ReloadSessionInput = {
  /** End a running turn. Default: false. */
  force?: InputMaybe<Scalars['Boolean']['input']>;
  /** Skip refreshing the repository. Default: false. */
  noRepo?: InputMaybe<Scalars['Boolean']['input']>;
  /** Global id or UUID. */
  sessionId: Scalars['ID']['input'];
};

export type ReloadSessionPayload = ConflictError | NotFoundError | ReloadSessionSuccess | ValidationError;

export type ReloadSessionSuccess = {
  __typename?: 'ReloadSessionSuccess';
  reload: Reload;
};

export type ReloadStatus =
  | 'FAILED'
  | 'RUNNING'
  | 'SUCCEEDED';

export type RemoveMemberInput = {
  userId: Scalars['ID']['input'];
};

export type RemoveMemberPayload = ConflictError | NotFoundError | RemoveMemberSuccess | ValidationError;

export type RemoveMemberSuccess = {
  __typename?: 'RemoveMemberSuccess';
  member: User;
};

export type RenewLeaseInput = {
  /** The generation held; omit to acquire (generation + 1). */
  generation?: InputMaybe<Scalars['Int']['input']>;
  /** Global id or UUID of the sandbox token’s own session. */
  sessionId: Scalars['ID']['input'];
};

export type RenewLeasePayload = ConflictError | LeaseFencedError | NotFoundError | RenewLeaseSuccess | ValidationError;

export type RenewLeaseSuccess = {
  __typename?: 'RenewLeaseSuccess';
  lease: ExecutionLease;
};

export type ReportAgentEventsInput = {
  /** OpenCode events, each JSON-encoded, in the order they occurred. */
  events: Array<Scalars['String']['input']>;
  sessionId: Scalars['ID']['input'];
};

export type ReportAgentEventsPayload = ConflictError | NotFoundError | ReportAgentEventsSuccess | ValidationError;

export type ReportAgentEventsSuccess = {
  __typename?: 'ReportAgentEventsSuccess';
  /** Events that became sessionEvents. */
  accepted: Scalars['Int']['output'];
};

export type ReportReloadPhaseInput = {
  message?: InputMaybe<Scalars['String']['input']>;
  phase: ReloadPhaseName;
  reloadId: Scalars['ID']['input'];
  status: ReloadPhaseStatus;
};

export type ReportReloadPhasePayload = ConflictError | NotFoundError | ReportReloadPhaseSuccess | ValidationError;

export type ReportReloadPhaseSuccess = {
  __typename?: 'ReportReloadPhaseSuccess';
  reload: Reload;
};

export type ReportRuntimeStateInput = {
  /** Why, for ERROR (e.g. the SandboxMemoryGuard numbers). */
  message?: InputMaybe<Scalars['String']['input']>;
  sessionId: Scalars['ID']['input'];
  state: RuntimeState;
};

export type ReportRuntimeStatePayload = ConflictError | NotFoundError | ReportRuntimeStateSuccess | ValidationError;

export type ReportRuntimeStateSuccess = {
  __typename?: 'ReportRuntimeStateSuccess';
  sandbox: Sandbox;
};

export type ReportTelemetryInput = {
  daemonRssBytes: Scalars['Float']['input'];
  diskTotalBytes: Scalars['Float']['input'];
  diskUsedBytes: Scalars['Float']['input'];
  load1: Scalars['Float']['input'];
  memoryLimitBytes: Scalars['Float']['input'];
  memoryUsedBytes: Scalars['Float']['input'];
  opencodeRssBytes: Scalars['Float']['input'];
  reason: TelemetryReason;
  sandboxId: Scalars['ID']['input'];
};

export type ReportTelemetryPayload = ConflictError | NotFoundError | ReportTelemetrySuccess | ValidationError;

export type ReportTelemetrySuccess = {
  __typename?: 'ReportTelemetrySuccess';
  sample: TelemetrySample;
};

/** The repository could not be read. */
export type RepositoryUnreachableError = Error & {
  __typename?: 'RepositoryUnreachableError';
  code: Scalars['String']['output'];
  /** Path of the input field at fault. */
  field: Maybe<Array<Scalars['String']['output']>>;
  message: Scalars['String']['output'];
};

/** The SINGULACOMP_ prefix is reserved. */
export type ReservedSecretNameError = Error & {
  __typename?: 'ReservedSecretNameError';
  code: Scalars['String']['output'];
  /** Path of the input field at fault. */
  field: Maybe<Array<Scalars['String']['output']>>;
  message: Scalars['String']['output'];
};

export type RevokeShareLinkInput = {
  shareLinkId: Scalars['ID']['input'];
};

export type RevokeShareLinkPayload = ConflictError | NotFoundError | RevokeShareLinkSuccess | ValidationError;

export type RevokeShareLinkSuccess = {
  __typename?: 'RevokeShareLinkSuccess';
  shareLink: ShareLink;
};

export type RevokeTokenInput = {
  tokenId: Scalars['ID']['input'];
};

export type RevokeTokenPayload = ConflictError | NotFoundError | RevokeTokenSuccess | ValidationError;

export type RevokeTokenSuccess = {
  __typename?: 'RevokeTokenSuccess';
  token: Token;
};

/** OpenCode's state as the sandbox daemon sees it. */
export type RuntimeState =
  | 'BUSY'
  | 'ERROR'
  | 'HEALTHY'
  | 'IDLE'
  | 'RETRY'
  | 'STARTING';

export type Sandbox = Node & {
  __typename?: 'Sandbox';
  /** Metered cost so far (per second of running time, at the provider rate). */
  costUsd: Scalars['Float']['output'];
  cpu: Scalars['Int']['output'];
  createdAt: Scalars['DateTime']['output'];
  diskGiB: Scalars['Int']['output'];
  error: Maybe<Scalars['String']['output']>;
  id: Scalars['ID']['output'];
  /** Why the idle reaper leaves this sandbox alone right now (null: nothing keeps it). */
  keptAliveBecause: Maybe<Scalars['String']['output']>;
  latestTelemetry: Maybe<TelemetrySample>;
  lease: Maybe<ExecutionLease>;
  leaseExpiresAt: Maybe<Scalars['DateTime']['output']>;
  memoryGiB: Scalars['Int']['output'];
  previewUrl: PreviewUrl;
  provider: Provider;
  providerSandboxId: Maybe<Scalars['String']['output']>;
  runtimeState: Maybe<Scalars['String']['output']>;
  /** The raw UUID. */
  sandboxId: Scalars['String']['output'];
  session: Session;
  shareLinks: Array<ShareLink>;
  snapshot: Maybe<Snapshot>;
  startedAt: Maybe<Scalars['DateTime']['output']>;
  status: SandboxStatus;
  stopReason: Maybe<StopReason>;
  stoppedAt: Maybe<Scalars['DateTime']['output']>;
  telemetry: TelemetrySampleConnection;
  /** Clamps applied to the template's spec by the provider's own caps (R-SBX-4). */
  warnings: Array<Scalars['String']['output']>;
};


export type SandboxPreviewUrlArgs = {
  form?: InputMaybe<PreviewForm>;
  port: Scalars['Int']['input'];
};


export type SandboxTelemetryArgs = {
  after?: InputMaybe<Scalars['String']['input']>;
  before?: InputMaybe<Scalars['String']['input']>;
  first?: InputMaybe<Scalars['Int']['input']>;
  last?: InputMaybe<Scalars['Int']['input']>;
};

export type SandboxStatus =
  | 'CREATING'
  | 'DESTROYED'
  | 'ERROR'
  | 'HIBERNATED'
  | 'PENDING'
  | 'STARTED'
  | 'STARTING'
  | 'STOPPED'
  | 'STOPPING';

export type Secret = {
  __typename?: 'Secret';
  name: Scalars['String']['output'];
  runtimeDelivery: Scalars['Boolean']['output'];
  updatedAt: Scalars['DateTime']['output'];
};

export type SendMessageInput = {
  /** Global id or UUID. */
  sessionId: Scalars['ID']['input'];
  text: Scalars['String']['input'];
};

export type SendMessagePayload = AgentUnavailableError | ConflictError | NotFoundError | SendMessageSuccess | ValidationError;

export type SendMessageSuccess = {
  __typename?: 'SendMessageSuccess';
  session: Session;
};

export type Session = Node & {
  __typename?: 'Session';
  agent: Scalars['String']['output'];
  /** true when the agent can take a turn: the session is RUNNING and OpenCode is HEALTHY, IDLE or BUSY. sessionUpdated and accountSessions fire when it changes. */
  agentReady: Scalars['Boolean']['output'];
  baseCommit: Maybe<Scalars['String']['output']>;
  baseRef: Scalars['String']['output'];
  branchName: Scalars['String']['output'];
  /** Metered cost so far (per second of running sandbox time). */
  costUsd: Scalars['Float']['output'];
  createdAt: Scalars['DateTime']['output'];
  failureReason: Maybe<Scalars['String']['output']>;
  id: Scalars['ID']['output'];
  lease: Maybe<ExecutionLease>;
  llmUsage: LlmUsage;
  /** The agent's transcript, oldest first (empty once the session stopped). */
  messages: AgentMessageConnection;
  project: Project;
  /** What a PROVISIONING session waits for (PREPARING_IMAGE: its image is being built); null otherwise. */
  provisioningPhase: Maybe<ProvisioningPhase>;
  reloads: ReloadConnection;
  /** OpenCode's state as the sandbox daemon last reported it while the session is RUNNING; null before the first report and once the session ended. */
  runtimeState: Maybe<RuntimeState>;
  sandbox: Maybe<Sandbox>;
  /** Monotonic per-session change counter. */
  seq: Scalars['Int']['output'];
  /** The session UUID; equals branchName. */
  sessionId: Scalars['String']['output'];
  startedAt: Maybe<Scalars['DateTime']['output']>;
  /** RUNNING means the sandbox is up; the agent inside may still be starting (see agentReady). */
  status: SessionStatus;
  stopReason: Maybe<StopReason>;
  stoppedAt: Maybe<Scalars['DateTime']['output']>;
  template: Maybe<Template>;
};


export type SessionMessagesArgs = {
  after?: InputMaybe<Scalars['String']['input']>;
  before?: InputMaybe<Scalars['String']['input']>;
  first?: InputMaybe<Scalars['Int']['input']>;
  last?: InputMaybe<Scalars['Int']['input']>;
};


export type SessionReloadsArgs = {
  after?: InputMaybe<Scalars['String']['input']>;
  before?: InputMaybe<Scalars['String']['input']>;
  first?: InputMaybe<Scalars['Int']['input']>;
  last?: InputMaybe<Scalars['Int']['input']>;
};

export type SessionConnection = {
  __typename?: 'SessionConnection';
  edges: Array<SessionEdge>;
  pageInfo: PageInfo;
};

export type SessionEdge = {
  __typename?: 'SessionEdge';
  cursor: Scalars['String']['output'];
  node: Session;
};

/** QUEUED, BRANCHING and COMPLETED exist for compatibility and are never stored or returned. */
export type SessionStatus =
  | 'BRANCHING'
  | 'COMPLETED'
  | 'FAILED'
  | 'PROVISIONING'
  | 'QUEUED'
  | 'RUNNING'
  | 'STOPPED';

export type SetSecretInput = {
  name: Scalars['String']['input'];
  projectId: Scalars['ID']['input'];
  /** Deliver into sandboxes. Default false. */
  runtimeDelivery?: InputMaybe<Scalars['Boolean']['input']>;
  value: Scalars['String']['input'];
};

export type SetSecretPayload = ConflictError | NotFoundError | ReservedSecretNameError | SetSecretSuccess | ValidationError;

export type SetSecretSuccess = {
  __typename?: 'SetSecretSuccess';
  secret: Secret;
};

export type ShareLink = Node & {
  __typename?: 'ShareLink';
  active: Scalars['Boolean']['output'];
  createdAt: Scalars['DateTime']['output'];
  expiresAt: Scalars['DateTime']['output'];
  id: Scalars['ID']['output'];
  mode: ShareLinkMode;
  port: Scalars['Int']['output'];
  revokedAt: Maybe<Scalars['DateTime']['output']>;
};

export type ShareLinkMode =
  /** Every method and WebSocket upgrades. */
  | 'INTERACTIVE'
  /** GET and HEAD only, no WebSocket. */
  | 'VIEW_ONLY';

export type Snapshot = Node & {
  __typename?: 'Snapshot';
  builtAt: Maybe<Scalars['DateTime']['output']>;
  createdAt: Scalars['DateTime']['output'];
  error: Maybe<Scalars['String']['output']>;
  id: Scalars['ID']['output'];
  key: Scalars['String']['output'];
  provider: Provider;
  runtimeVersion: Scalars['String']['output'];
  status: SnapshotStatus;
};

export type SnapshotStatus =
  | 'ACTIVE'
  | 'BUILDING'
  | 'FAILED';

export type StopReason =
  | 'FAILED'
  | 'IDLE_REAPED'
  | 'LEASE_EXPIRED'
  | 'MEMORY_GUARD'
  | 'PROVIDER'
  | 'SHUTDOWN'
  | 'USER';

export type StopSessionInput = {
  /** Global id or UUID. */
  sessionId: Scalars['ID']['input'];
};

export type StopSessionPayload = ConflictError | NotFoundError | StopSessionSuccess | ValidationError;

export type StopSessionSuccess = {
  __typename?: 'StopSessionSuccess';
  session: Session;
};

export type Subscription = {
  __typename?: 'Subscription';
  /** Every session change in the viewer's account. `extensions.seq` numbers the account's stream; `Session.seq` the session's. */
  accountSessions: Session;
  /** Changes of one change request (opened, merged, closed). */
  changeRequestUpdated: ChangeRequest;
  reloadProgress: Reload;
  sandboxUpdated: Sandbox;
  /** The session's agent events: text deltas in order, tool-call updates, turn state. */
  sessionEvents: AgentEvent;
  /** Changes of one session; `Session.seq` is the seq of the change. */
  sessionUpdated: Session;
  /** Telemetry of one sandbox. A slow reader gets the newest sample, not a backlog. */
  telemetry: TelemetrySample;
};


export type SubscriptionAccountSessionsArgs = {
  after?: InputMaybe<Scalars['Int']['input']>;
};


export type SubscriptionChangeRequestUpdatedArgs = {
  after?: InputMaybe<Scalars['Int']['input']>;
  id: Scalars['ID']['input'];
};


export type SubscriptionReloadProgressArgs = {
  after?: InputMaybe<Scalars['Int']['input']>;
  reloadId: Scalars['ID']['input'];
};


export type SubscriptionSandboxUpdatedArgs = {
  after?: InputMaybe<Scalars['Int']['input']>;
  id: Scalars['ID']['input'];
};


export type SubscriptionSessionEventsArgs = {
  after?: InputMaybe<Scalars['Int']['input']>;
  sessionId: Scalars['ID']['input'];
};


export type SubscriptionSessionUpdatedArgs = {
  after?: InputMaybe<Scalars['Int']['input']>;
  id: Scalars['ID']['input'];
};


export type SubscriptionTelemetryArgs = {
  after?: InputMaybe<Scalars['Int']['input']>;
  sandboxId: Scalars['ID']['input'];
};

export type SyncProjectManifestInput = {
  projectId: Scalars['ID']['input'];
  /** Branch, tag or commit; default: the default branch. */
  ref?: InputMaybe<Scalars['String']['input']>;
};

export type SyncProjectManifestPayload = ConflictError | ManifestInvalidError | NotFoundError | SyncProjectManifestSuccess | ValidationError;

export type SyncProjectManifestSuccess = {
  __typename?: 'SyncProjectManifestSuccess';
  commit: Scalars['String']['output'];
  project: Project;
  warnings: Array<Scalars['String']['output']>;
};

export type TelemetryReason =
  | 'INTERVAL'
  | 'MEMORY_GUARD'
  | 'STATE_CHANGE';

export type TelemetrySample = {
  __typename?: 'TelemetrySample';
  at: Scalars['DateTime']['output'];
  daemonRssBytes: Scalars['Float']['output'];
  diskTotalBytes: Scalars['Float']['output'];
  diskUsedBytes: Scalars['Float']['output'];
  load1: Scalars['Float']['output'];
  memoryLimitBytes: Scalars['Float']['output'];
  memoryUsedBytes: Scalars['Float']['output'];
  opencodeRssBytes: Scalars['Float']['output'];
  reason: TelemetryReason;
};

export type TelemetrySampleConnection = {
  __typename?: 'TelemetrySampleConnection';
  edges: Array<TelemetrySampleEdge>;
  pageInfo: PageInfo;
};

export type TelemetrySampleEdge = {
  __typename?: 'TelemetrySampleEdge';
  cursor: Scalars['String']['output'];
  node: TelemetrySample;
};

export type Template = Node & {
  __typename?: 'Template';
  cpu: Scalars['Int']['output'];
  diskGiB: Scalars['Int']['output'];
  dockerfile: Maybe<Scalars['String']['output']>;
  id: Scalars['ID']['output'];
  image: Maybe<Scalars['String']['output']>;
  isDefault: Scalars['Boolean']['output'];
  memoryGiB: Scalars['Int']['output'];
  name: Scalars['String']['output'];
  provider: Maybe<Provider>;
  slug: Scalars['String']['output'];
  snapshot: Maybe<Snapshot>;
  warnings: Array<Scalars['String']['output']>;
};

export type Token = Node & {
  __typename?: 'Token';
  createdAt: Scalars['DateTime']['output'];
  expiresAt: Maybe<Scalars['DateTime']['output']>;
  id: Scalars['ID']['output'];
  kind: TokenKind;
  lastUsedAt: Maybe<Scalars['DateTime']['output']>;
  name: Scalars['String']['output'];
  prefix: Scalars['String']['output'];
  revokedAt: Maybe<Scalars['DateTime']['output']>;
  scopes: Array<Scalars['String']['output']>;
};

export type TokenConnection = {
  __typename?: 'TokenConnection';
  edges: Array<TokenEdge>;
  pageInfo: PageInfo;
};

export type TokenEdge = {
  __typename?: 'TokenEdge';
  cursor: Scalars['String']['output'];
  node: Token;
};

export type TokenKind =
  | 'PERSONAL_ACCESS'
  | 'SANDBOX'
  | 'SERVICE_ACCOUNT';

export type Trigger = Node & {
  __typename?: 'Trigger';
  agent: Maybe<Scalars['String']['output']>;
  baseRef: Maybe<Scalars['String']['output']>;
  createdAt: Scalars['DateTime']['output'];
  id: Scalars['ID']['output'];
  kind: TriggerKind;
  name: Scalars['String']['output'];
  nextFireAt: Maybe<Scalars['DateTime']['output']>;
  paused: Scalars['Boolean']['output'];
  project: Project;
  prompt: Maybe<Scalars['String']['output']>;
  runs: TriggerRunsConnection;
  /** Cron expression, UTC (SCHEDULE). */
  schedule: Maybe<Scalars['String']['output']>;
  templateSlug: Maybe<Scalars['String']['output']>;
  /** The raw UUID. */
  triggerId: Scalars['String']['output'];
  /** Where to POST deliveries signed with X-Hub-Signature-256 (WEBHOOK). */
  webhookUrl: Maybe<Scalars['String']['output']>;
};


export type TriggerRunsArgs = {
  after?: InputMaybe<Scalars['String']['input']>;
  before?: InputMaybe<Scalars['String']['input']>;
  first?: InputMaybe<Scalars['Int']['input']>;
  last?: InputMaybe<Scalars['Int']['input']>;
};

export type TriggerKind =
  | 'SCHEDULE'
  | 'WEBHOOK';

export type TriggerRun = {
  __typename?: 'TriggerRun';
  createdAt: Scalars['DateTime']['output'];
  id: Scalars['ID']['output'];
  reason: Maybe<Scalars['String']['output']>;
  scheduledFor: Maybe<Scalars['DateTime']['output']>;
  sessionId: Maybe<Scalars['String']['output']>;
  status: TriggerRunStatus;
};

export type TriggerRunStatus =
  | 'FAILED'
  | 'SESSION_CREATED'
  | 'SKIPPED_LIMIT';

export type TriggerRunsConnection = {
  __typename?: 'TriggerRunsConnection';
  edges: Array<TriggerRunsConnectionEdge>;
  pageInfo: PageInfo;
};

export type TriggerRunsConnectionEdge = {
  __typename?: 'TriggerRunsConnectionEdge';
  cursor: Scalars['String']['output'];
  node: TriggerRun;
};

export type TurnState =
  | 'BUSY'
  | 'ERROR'
  | 'IDLE'
  | 'RETRY';

export type UpdateAccountInput = {
  /** Drop the override and use the tier default. */
  clearLimit?: InputMaybe<Scalars['Boolean']['input']>;
  concurrentSessionLimit?: InputMaybe<Scalars['Int']['input']>;
  tier?: InputMaybe<AccountTier>;
};

export type UpdateAccountPayload = ConflictError | NotFoundError | UpdateAccountSuccess | ValidationError;

export type UpdateAccountSuccess = {
  __typename?: 'UpdateAccountSuccess';
  account: Account;
};

export type UpdateTriggerInput = {
  agent?: InputMaybe<Scalars['String']['input']>;
  baseRef?: InputMaybe<Scalars['String']['input']>;
  name?: InputMaybe<Scalars['String']['input']>;
  prompt?: InputMaybe<Scalars['String']['input']>;
  schedule?: InputMaybe<Scalars['String']['input']>;
  templateSlug?: InputMaybe<Scalars['String']['input']>;
  triggerId: Scalars['ID']['input'];
};

export type UpdateTriggerPayload = ConflictError | NotFoundError | UpdateTriggerSuccess | ValidationError;

export type UpdateTriggerSuccess = {
  __typename?: 'UpdateTriggerSuccess';
  trigger: Trigger;
};

export type User = {
  __typename?: 'User';
  createdAt: Scalars['DateTime']['output'];
  email: Scalars['String']['output'];
  id: Scalars['ID']['output'];
  isAdmin: Scalars['Boolean']['output'];
  /** The instance admin (the bootstrap user) creates accounts. */
  isInstanceAdmin: Scalars['Boolean']['output'];
  name: Scalars['String']['output'];
  role: UserRole;
};

/** A member's role in their account: ADMIN runs the account (members, tier, service accounts). */
export type UserRole =
  | 'ADMIN'
  | 'MEMBER';

/** Input is well-typed but invalid. */
export type ValidationError = Error & {
  __typename?: 'ValidationError';
  code: Scalars['String']['output'];
  /** Path of the input field at fault. */
  field: Maybe<Array<Scalars['String']['output']>>;
  message: Scalars['String']['output'];
};

/** The authenticated principal: a user, a service account or a sandbox. */
export type Viewer = {
  __typename?: 'Viewer';
  account: Account;
  kind: TokenKind;
  /** The account's projects, newest first (a sandbox token sees its own project). */
  projects: ProjectConnection;
  scopes: Array<Scalars['String']['output']>;
  /** For a sandbox token: the session it is bound to. */
  sessionId: Maybe<Scalars['String']['output']>;
  tokenExpiresAt: Maybe<Scalars['DateTime']['output']>;
  /** Personal tokens of this user; for admins, every user and service-account token of the account. Needs tokens:read. */
  tokens: TokenConnection;
  user: Maybe<User>;
};


/** The authenticated principal: a user, a service account or a sandbox. */
export type ViewerProjectsArgs = {
  after?: InputMaybe<Scalars['String']['input']>;
  before?: InputMaybe<Scalars['String']['input']>;
  first?: InputMaybe<Scalars['Int']['input']>;
  last?: InputMaybe<Scalars['Int']['input']>;
};


/** The authenticated principal: a user, a service account or a sandbox. */
export type ViewerTokensArgs = {
  after?: InputMaybe<Scalars['String']['input']>;
  before?: InputMaybe<Scalars['String']['input']>;
  first?: InputMaybe<Scalars['Int']['input']>;
  includeRevoked?: InputMaybe<Scalars['Boolean']['input']>;
  last?: InputMaybe<Scalars['Int']['input']>;
};

export type CliViewerQueryVariables = Exact<{ [key: string]: never; }>;


export type CliViewerQuery = { __typename?: 'Query', viewer: { __typename?: 'Viewer', kind: TokenKind, sessionId: string | null, scopes: Array<string> } };

export type CliProjectsQueryVariables = Exact<{
  after?: InputMaybe<Scalars['String']['input']>;
}>;


export type CliProjectsQuery = { __typename?: 'Query', viewer: { __typename?: 'Viewer', projects: { __typename?: 'ProjectConnection', edges: Array<{ __typename?: 'ProjectEdge', node: { __typename?: 'Project', id: string, projectId: string, name: string, repositoryUrl: string, defaultBranch: string, provider: Provider } }>, pageInfo: { __typename?: 'PageInfo', hasNextPage: boolean, endCursor: string | null } } } };

export type CliSessionFragment = { __typename?: 'Session', id: string, sessionId: string, status: SessionStatus, branchName: string, baseRef: string, agent: string, createdAt: string, stoppedAt: string | null, failureReason: string | null, project: { __typename?: 'Project', id: string, projectId: string, name: string } };

export type CliSessionsQueryVariables = Exact<{
  projectId?: InputMaybe<Scalars['ID']['input']>;
  status?: InputMaybe<SessionStatus>;
  after?: InputMaybe<Scalars['String']['input']>;
}>;


export type CliSessionsQuery = { __typename?: 'Query', sessions: { __typename?: 'SessionConnection', edges: Array<{ __typename?: 'SessionEdge', node: { __typename?: 'Session', id: string, sessionId: string, status: SessionStatus, branchName: string, baseRef: string, agent: string, createdAt: string, stoppedAt: string | null, failureReason: string | null, project: { __typename?: 'Project', id: string, projectId: string, name: string } } }>, pageInfo: { __typename?: 'PageInfo', hasNextPage: boolean, endCursor: string | null } } };

export type CliSessionQueryVariables = Exact<{
  id: Scalars['ID']['input'];
}>;


export type CliSessionQuery = { __typename?: 'Query', session: { __typename?: 'Session', id: string, sessionId: string, status: SessionStatus, branchName: string, baseRef: string, agent: string, createdAt: string, stoppedAt: string | null, failureReason: string | null, project: { __typename?: 'Project', id: string, projectId: string, name: string } } | null };

export type CliCreateSessionMutationVariables = Exact<{
  input: CreateSessionInput;
}>;


export type CliCreateSessionMutation = { __typename?: 'Mutation', createSession:
    | { __typename: 'BaseRefNotFoundError', code: string, message: string }
    | { __typename: 'ConflictError', code: string, message: string }
    | { __typename: 'CreateSessionSuccess', session: { __typename?: 'Session', id: string, sessionId: string, status: SessionStatus, branchName: string, baseRef: string, agent: string, createdAt: string, stoppedAt: string | null, failureReason: string | null, project: { __typename?: 'Project', id: string, projectId: string, name: string } } }
    | { __typename: 'NotFoundError', code: string, message: string }
    | { __typename: 'RepositoryUnreachableError', code: string, message: string }
    | { __typename: 'ValidationError', code: string, message: string }
   };

export type CliStopSessionMutationVariables = Exact<{
  input: StopSessionInput;
}>;


export type CliStopSessionMutation = { __typename?: 'Mutation', stopSession:
    | { __typename: 'ConflictError', code: string, message: string }
    | { __typename: 'NotFoundError', code: string, message: string }
    | { __typename: 'StopSessionSuccess', session: { __typename?: 'Session', id: string, sessionId: string, status: SessionStatus, branchName: string, baseRef: string, agent: string, createdAt: string, stoppedAt: string | null, failureReason: string | null, project: { __typename?: 'Project', id: string, projectId: string, name: string } } }
    | { __typename: 'ValidationError', code: string, message: string }
   };

export type CliReloadFragment = { __typename?: 'Reload', id: string, status: ReloadStatus, error: string | null, noRepo: boolean, force: boolean, phases: Array<{ __typename?: 'ReloadPhase', name: ReloadPhaseName, status: ReloadPhaseStatus, message: string | null, at: string }> };

export type CliReloadSessionMutationVariables = Exact<{
  input: ReloadSessionInput;
}>;


export type CliReloadSessionMutation = { __typename?: 'Mutation', reloadSession:
    | { __typename: 'ConflictError', code: string, message: string }
    | { __typename: 'NotFoundError', code: string, message: string }
    | { __typename: 'ReloadSessionSuccess', reload: { __typename?: 'Reload', id: string, status: ReloadStatus, error: string | null, noRepo: boolean, force: boolean, phases: Array<{ __typename?: 'ReloadPhase', name: ReloadPhaseName, status: ReloadPhaseStatus, message: string | null, at: string }> } }
    | { __typename: 'ValidationError', code: string, message: string }
   };

export type CliReloadProgressSubscriptionVariables = Exact<{
  reloadId: Scalars['ID']['input'];
  after?: InputMaybe<Scalars['Int']['input']>;
}>;


export type CliReloadProgressSubscription = { __typename?: 'Subscription', reloadProgress: { __typename?: 'Reload', id: string, status: ReloadStatus, error: string | null, noRepo: boolean, force: boolean, phases: Array<{ __typename?: 'ReloadPhase', name: ReloadPhaseName, status: ReloadPhaseStatus, message: string | null, at: string }> } };

export type CliChangeRequestFragment = { __typename?: 'ChangeRequest', id: string, changeRequestId: string, title: string, status: ChangeRequestStatus, headRef: string, baseRef: string, headCommit: string, baseCommit: string, mergeCommit: string | null, mergeMethod: MergeMethod | null, filesChanged: number, additions: number, deletions: number, mergeable: boolean, conflicts: Array<string> };

export type CliOpenChangeRequestMutationVariables = Exact<{
  input: OpenChangeRequestInput;
}>;


export type CliOpenChangeRequestMutation = { __typename?: 'Mutation', openChangeRequest:
    | { __typename: 'ConflictError', code: string, message: string }
    | { __typename: 'NotFoundError', code: string, message: string }
    | { __typename: 'OpenChangeRequestSuccess', changeRequest: { __typename?: 'ChangeRequest', id: string, changeRequestId: string, title: string, status: ChangeRequestStatus, headRef: string, baseRef: string, headCommit: string, baseCommit: string, mergeCommit: string | null, mergeMethod: MergeMethod | null, filesChanged: number, additions: number, deletions: number, mergeable: boolean, conflicts: Array<string> } }
    | { __typename: 'RepositoryUnreachableError', code: string, message: string }
    | { __typename: 'ValidationError', code: string, message: string }
   };

export type CliMergeChangeRequestMutationVariables = Exact<{
  input: MergeChangeRequestInput;
}>;


export type CliMergeChangeRequestMutation = { __typename?: 'Mutation', mergeChangeRequest:
    | { __typename: 'ConflictError', code: string, message: string }
    | { __typename: 'MergeChangeRequestSuccess', changeRequest: { __typename?: 'ChangeRequest', id: string, changeRequestId: string, title: string, status: ChangeRequestStatus, headRef: string, baseRef: string, headCommit: string, baseCommit: string, mergeCommit: string | null, mergeMethod: MergeMethod | null, filesChanged: number, additions: number, deletions: number, mergeable: boolean, conflicts: Array<string> } }
    | { __typename: 'MergeConflictError', code: string, message: string }
    | { __typename: 'NotFastForwardError', code: string, message: string }
    | { __typename: 'NotFoundError', code: string, message: string }
    | { __typename: 'RepositoryUnreachableError', code: string, message: string }
    | { __typename: 'ValidationError', code: string, message: string }
   };

export type CliTokenFragment = { __typename?: 'Token', id: string, kind: TokenKind, name: string, prefix: string, scopes: Array<string>, createdAt: string, expiresAt: string | null, revokedAt: string | null };

export type CliCreatePersonalAccessTokenMutationVariables = Exact<{
  input: CreateTokenInput;
}>;


export type CliCreatePersonalAccessTokenMutation = { __typename?: 'Mutation', createPersonalAccessToken:
    | { __typename: 'ConflictError', code: string, message: string }
    | { __typename: 'CreateTokenSuccess', secret: string, token: { __typename?: 'Token', id: string, kind: TokenKind, name: string, prefix: string, scopes: Array<string>, createdAt: string, expiresAt: string | null, revokedAt: string | null } }
    | { __typename: 'NotFoundError', code: string, message: string }
    | { __typename: 'ValidationError', code: string, message: string }
   };

export type CliCreateServiceAccountTokenMutationVariables = Exact<{
  input: CreateTokenInput;
}>;


export type CliCreateServiceAccountTokenMutation = { __typename?: 'Mutation', createServiceAccountToken:
    | { __typename: 'ConflictError', code: string, message: string }
    | { __typename: 'CreateTokenSuccess', secret: string, token: { __typename?: 'Token', id: string, kind: TokenKind, name: string, prefix: string, scopes: Array<string>, createdAt: string, expiresAt: string | null, revokedAt: string | null } }
    | { __typename: 'NotFoundError', code: string, message: string }
    | { __typename: 'ValidationError', code: string, message: string }
   };

export type CliRevokeTokenMutationVariables = Exact<{
  input: RevokeTokenInput;
}>;


export type CliRevokeTokenMutation = { __typename?: 'Mutation', revokeToken:
    | { __typename: 'ConflictError', code: string, message: string }
    | { __typename: 'NotFoundError', code: string, message: string }
    | { __typename: 'RevokeTokenSuccess', token: { __typename?: 'Token', id: string, kind: TokenKind, name: string, prefix: string, scopes: Array<string>, createdAt: string, expiresAt: string | null, revokedAt: string | null } }
    | { __typename: 'ValidationError', code: string, message: string }
   };

export const CliSessionFragmentDoc = {"kind":"Document","definitions":[{"kind":"FragmentDefinition","name":{"kind":"Name","value":"CliSession"},"typeCondition":{"kind":"NamedType","name":{"kind":"Name","value":"Session"}},"selectionSet":{"kind":"SelectionSet","selections":[{"kind":"Field","name":{"kind":"Name","value":"id"}},{"kind":"Field","name":{"kind":"Name","value":"sessionId"}},{"kind":"Field","name":{"kind":"Name","value":"status"}},{"kind":"Field","name":{"kind":"Name","value":"branchName"}},{"kind":"Field","name":{"kind":"Name","value":"baseRef"}},{"kind":"Field","name":{"kind":"Name","value":"agent"}},{"kind":"Field","name":{"kind":"Name","value":"createdAt"}},{"kind":"Field","name":{"kind":"Name","value":"stoppedAt"}},{"kind":"Field","name":{"kind":"Name","value":"failureReason"}},{"kind":"Field","name":{"kind":"Name","value":"project"},"selectionSet":{"kind":"SelectionSet","selections":[{"kind":"Field","name":{"kind":"Name","value":"id"}},{"kind":"Field","name":{"kind":"Name","value":"projectId"}},{"kind":"Field","name":{"kind":"Name","value":"name"}}]}}]}}]} as unknown as DocumentNode<CliSessionFragment, unknown>;
export const CliReloadFragmentDoc = {"kind":"Document","definitions":[{"kind":"FragmentDefinition","name":{"kind":"Name","value":"CliReload"},"typeCondition":{"kind":"NamedType","name":{"kind":"Name","value":"Reload"}},"selectionSet":{"kind":"SelectionSet","selections":[{"kind":"Field","name":{"kind":"Name","value":"id"}},{"kind":"Field","name":{"kind":"Name","value":"status"}},{"kind":"Field","name":{"kind":"Name","value":"error"}},{"kind":"Field","name":{"kind":"Name","value":"noRepo"}},{"kind":"Field","name":{"kind":"Name","value":"force"}},{"kind":"Field","name":{"kind":"Name","value":"phases"},"selectionSet":{"kind":"SelectionSet","selections":[{"kind":"Field","name":{"kind":"Name","value":"name"}},{"kind":"Field","name":{"kind":"Name","value":"status"}},{"kind":"Field","name":{"kind":"Name","value":"message"}},{"kind":"Field","name":{"kind":"Name","value":"at"}}]}}]}}]} as unknown as DocumentNode<CliReloadFragment, unknown>;
export const CliChangeRequestFragmentDoc = {"kind":"Document","definitions":[{"kind":"FragmentDefinition","name":{"kind":"Name","value":"CliChangeRequest"},"typeCondition":{"kind":"NamedType","name":{"kind":"Name","value":"ChangeRequest"}},"selectionSet":{"kind":"SelectionSet","selections":[{"kind":"Field","name":{"kind":"Name","value":"id"}},{"kind":"Field","name":{"kind":"Name","value":"changeRequestId"}},{"kind":"Field","name":{"kind":"Name","value":"title"}},{"kind":"Field","name":{"kind":"Name","value":"status"}},{"kind":"Field","name":{"kind":"Name","value":"headRef"}},{"kind":"Field","name":{"kind":"Name","value":"baseRef"}},{"kind":"Field","name":{"kind":"Name","value":"headCommit"}},{"kind":"Field","name":{"kind":"Name","value":"baseCommit"}},{"kind":"Field","name":{"kind":"Name","value":"mergeCommit"}},{"kind":"Field","name":{"kind":"Name","value":"mergeMethod"}},{"kind":"Field","name":{"kind":"Name","value":"filesChanged"}},{"kind":"Field","name":{"kind":"Name","value":"additions"}},{"kind":"Field","name":{"kind":"Name","value":"deletions"}},{"kind":"Field","name":{"kind":"Name","value":"mergeable"}},{"kind":"Field","name":{"kind":"Name","value":"conflicts"}}]}}]} as unknown as DocumentNode<CliChangeRequestFragment, unknown>;
export const CliTokenFragmentDoc = {"kind":"Document","definitions":[{"kind":"FragmentDefinition","name":{"kind":"Name","value":"CliToken"},"typeCondition":{"kind":"NamedType","name":{"kind":"Name","value":"Token"}},"selectionSet":{"kind":"SelectionSet","selections":[{"kind":"Field","name":{"kind":"Name","value":"id"}},{"kind":"Field","name":{"kind":"Name","value":"kind"}},{"kind":"Field","name":{"kind":"Name","value":"name"}},{"kind":"Field","name":{"kind":"Name","value":"prefix"}},{"kind":"Field","name":{"kind":"Name","value":"scopes"}},{"kind":"Field","name":{"kind":"Name","value":"createdAt"}},{"kind":"Field","name":{"kind":"Name","value":"expiresAt"}},{"kind":"Field","name":{"kind":"Name","value":"revokedAt"}}]}}]} as unknown as DocumentNode<CliTokenFragment, unknown>;
export const CliViewerDocument = {"kind":"Document","definitions":[{"kind":"OperationDefinition","operation":"query","name":{"kind":"Name","value":"CliViewer"},"selectionSet":{"kind":"SelectionSet","selections":[{"kind":"Field","name":{"kind":"Name","value":"viewer"},"selectionSet":{"kind":"SelectionSet","selections":[{"kind":"Field","name":{"kind":"Name","value":"kind"}},{"kind":"Field","name":{"kind":"Name","value":"sessionId"}},{"kind":"Field","name":{"kind":"Name","value":"scopes"}}]}}]}}]} as unknown as DocumentNode<CliViewerQuery, CliViewerQueryVariables>;
export const CliProjectsDocument = {"kind":"Document","definitions":[{"kind":"OperationDefinition","operation":"query","name":{"kind":"Name","value":"CliProjects"},"variableDefinitions":[{"kind":"VariableDefinition","variable":{"kind":"Variable","name":{"kind":"Name","value":"after"}},"type":{"kind":"NamedType","name":{"kind":"Name","value":"String"}}}],"selectionSet":{"kind":"SelectionSet","selections":[{"kind":"Field","name":{"kind":"Name","value":"viewer"},"selectionSet":{"kind":"SelectionSet","selections":[{"kind":"Field","name":{"kind":"Name","value":"projects"},"arguments":[{"kind":"Argument","name":{"kind":"Name","value":"first"},"value":{"kind":"IntValue","value":"100"}},{"kind":"Argument","name":{"kind":"Name","value":"after"},"value":{"kind":"Variable","name":{"kind":"Name","value":"after"}}}],"selectionSet":{"kind":"SelectionSet","selections":[{"kind":"Field","name":{"kind":"Name","value":"edges"},"selectionSet":{"kind":"SelectionSet","selections":[{"kind":"Field","name":{"kind":"Name","value":"node"},"selectionSet":{"kind":"SelectionSet","selections":[{"kind":"Field","name":{"kind":"Name","value":"id"}},{"kind":"Field","name":{"kind":"Name","value":"projectId"}},{"kind":"Field","name":{"kind":"Name","value":"name"}},{"kind":"Field","name":{"kind":"Name","value":"repositoryUrl"}},{"kind":"Field","name":{"kind":"Name","value":"defaultBranch"}},{"kind":"Field","name":{"kind":"Name","value":"provider"}}]}}]}},{"kind":"Field","name":{"kind":"Name","value":"pageInfo"},"selectionSet":{"kind":"SelectionSet","selections":[{"kind":"Field","name":{"kind":"Name","value":"hasNextPage"}},{"kind":"Field","name":{"kind":"Name","value":"endCursor"}}]}}]}}]}}]}}]} as unknown as DocumentNode<CliProjectsQuery, CliProjectsQueryVariables>;
export const CliSessionsDocument = {"kind":"Document","definitions":[{"kind":"OperationDefinition","operation":"query","name":{"kind":"Name","value":"CliSessions"},"variableDefinitions":[{"kind":"VariableDefinition","variable":{"kind":"Variable","name":{"kind":"Name","value":"projectId"}},"type":{"kind":"NamedType","name":{"kind":"Name","value":"ID"}}},{"kind":"VariableDefinition","variable":{"kind":"Variable","name":{"kind":"Name","value":"status"}},"type":{"kind":"NamedType","name":{"kind":"Name","value":"SessionStatus"}}},{"kind":"VariableDefinition","variable":{"kind":"Variable","name":{"kind":"Name","value":"after"}},"type":{"kind":"NamedType","name":{"kind":"Name","value":"String"}}}],"selectionSet":{"kind":"SelectionSet","selections":[{"kind":"Field","name":{"kind":"Name","value":"sessions"},"arguments":[{"kind":"Argument","name":{"kind":"Name","value":"first"},"value":{"kind":"IntValue","value":"100"}},{"kind":"Argument","name":{"kind":"Name","value":"projectId"},"value":{"kind":"Variable","name":{"kind":"Name","value":"projectId"}}},{"kind":"Argument","name":{"kind":"Name","value":"status"},"value":{"kind":"Variable","name":{"kind":"Name","value":"status"}}},{"kind":"Argument","name":{"kind":"Name","value":"after"},"value":{"kind":"Variable","name":{"kind":"Name","value":"after"}}}],"selectionSet":{"kind":"SelectionSet","selections":[{"kind":"Field","name":{"kind":"Name","value":"edges"},"selectionSet":{"kind":"SelectionSet","selections":[{"kind":"Field","name":{"kind":"Name","value":"node"},"selectionSet":{"kind":"SelectionSet","selections":[{"kind":"FragmentSpread","name":{"kind":"Name","value":"CliSession"}}]}}]}},{"kind":"Field","name":{"kind":"Name","value":"pageInfo"},"selectionSet":{"kind":"SelectionSet","selections":[{"kind":"Field","name":{"kind":"Name","value":"hasNextPage"}},{"kind":"Field","name":{"kind":"Name","value":"endCursor"}}]}}]}}]}},{"kind":"FragmentDefinition","name":{"kind":"Name","value":"CliSession"},"typeCondition":{"kind":"NamedType","name":{"kind":"Name","value":"Session"}},"selectionSet":{"kind":"SelectionSet","selections":[{"kind":"Field","name":{"kind":"Name","value":"id"}},{"kind":"Field","name":{"kind":"Name","value":"sessionId"}},{"kind":"Field","name":{"kind":"Name","value":"status"}},{"kind":"Field","name":{"kind":"Name","value":"branchName"}},{"kind":"Field","name":{"kind":"Name","value":"baseRef"}},{"kind":"Field","name":{"kind":"Name","value":"agent"}},{"kind":"Field","name":{"kind":"Name","value":"createdAt"}},{"kind":"Field","name":{"kind":"Name","value":"stoppedAt"}},{"kind":"Field","name":{"kind":"Name","value":"failureReason"}},{"kind":"Field","name":{"kind":"Name","value":"project"},"selectionSet":{"kind":"SelectionSet","selections":[{"kind":"Field","name":{"kind":"Name","value":"id"}},{"kind":"Field","name":{"kind":"Name","value":"projectId"}},{"kind":"Field","name":{"kind":"Name","value":"name"}}]}}]}}]} as unknown as DocumentNode<CliSessionsQuery, CliSessionsQueryVariables>;
export const CliSessionDocument = {"kind":"Document","definitions":[{"kind":"OperationDefinition","operation":"query","name":{"kind":"Name","value":"CliSession"},"variableDefinitions":[{"kind":"VariableDefinition","variable":{"kind":"Variable","name":{"kind":"Name","value":"id"}},"type":{"kind":"NonNullType","type":{"kind":"NamedType","name":{"kind":"Name","value":"ID"}}}}],"selectionSet":{"kind":"SelectionSet","selections":[{"kind":"Field","name":{"kind":"Name","value":"session"},"arguments":[{"kind":"Argument","name":{"kind":"Name","value":"id"},"value":{"kind":"Variable","name":{"kind":"Name","value":"id"}}}],"selectionSet":{"kind":"SelectionSet","selections":[{"kind":"FragmentSpread","name":{"kind":"Name","value":"CliSession"}}]}}]}},{"kind":"FragmentDefinition","name":{"kind":"Name","value":"CliSession"},"typeCondition":{"kind":"NamedType","name":{"kind":"Name","value":"Session"}},"selectionSet":{"kind":"SelectionSet","selections":[{"kind":"Field","name":{"kind":"Name","value":"id"}},{"kind":"Field","name":{"kind":"Name","value":"sessionId"}},{"kind":"Field","name":{"kind":"Name","value":"status"}},{"kind":"Field","name":{"kind":"Name","value":"branchName"}},{"kind":"Field","name":{"kind":"Name","value":"baseRef"}},{"kind":"Field","name":{"kind":"Name","value":"agent"}},{"kind":"Field","name":{"kind":"Name","value":"createdAt"}},{"kind":"Field","name":{"kind":"Name","value":"stoppedAt"}},{"kind":"Field","name":{"kind":"Name","value":"failureReason"}},{"kind":"Field","name":{"kind":"Name","value":"project"},"selectionSet":{"kind":"SelectionSet","selections":[{"kind":"Field","name":{"kind":"Name","value":"id"}},{"kind":"Field","name":{"kind":"Name","value":"projectId"}},{"kind":"Field","name":{"kind":"Name","value":"name"}}]}}]}}]} as unknown as DocumentNode<CliSessionQuery, CliSessionQueryVariables>;
export const CliCreateSessionDocument = {"kind":"Document","definitions":[{"kind":"OperationDefinition","operation":"mutation","name":{"kind":"Name","value":"CliCreateSession"},"variableDefinitions":[{"kind":"VariableDefinition","variable":{"kind":"Variable","name":{"kind":"Name","value":"input"}},"type":{"kind":"NonNullType","type":{"kind":"NamedType","name":{"kind":"Name","value":"CreateSessionInput"}}}}],"selectionSet":{"kind":"SelectionSet","selections":[{"kind":"Field","name":{"kind":"Name","value":"createSession"},"arguments":[{"kind":"Argument","name":{"kind":"Name","value":"input"},"value":{"kind":"Variable","name":{"kind":"Name","value":"input"}}}],"selectionSet":{"kind":"SelectionSet","selections":[{"kind":"Field","name":{"kind":"Name","value":"__typename"}},{"kind":"InlineFragment","typeCondition":{"kind":"NamedType","name":{"kind":"Name","value":"CreateSessionSuccess"}},"selectionSet":{"kind":"SelectionSet","selections":[{"kind":"Field","name":{"kind":"Name","value":"session"},"selectionSet":{"kind":"SelectionSet","selections":[{"kind":"FragmentSpread","name":{"kind":"Name","value":"CliSession"}}]}}]}},{"kind":"InlineFragment","typeCondition":{"kind":"NamedType","name":{"kind":"Name","value":"Error"}},"selectionSet":{"kind":"SelectionSet","selections":[{"kind":"Field","name":{"kind":"Name","value":"code"}},{"kind":"Field","name":{"kind":"Name","value":"message"}}]}}]}}]}},{"kind":"FragmentDefinition","name":{"kind":"Name","value":"CliSession"},"typeCondition":{"kind":"NamedType","name":{"kind":"Name","value":"Session"}},"selectionSet":{"kind":"SelectionSet","selections":[{"kind":"Field","name":{"kind":"Name","value":"id"}},{"kind":"Field","name":{"kind":"Name","value":"sessionId"}},{"kind":"Field","name":{"kind":"Name","value":"status"}},{"kind":"Field","name":{"kind":"Name","value":"branchName"}},{"kind":"Field","name":{"kind":"Name","value":"baseRef"}},{"kind":"Field","name":{"kind":"Name","value":"agent"}},{"kind":"Field","name":{"kind":"Name","value":"createdAt"}},{"kind":"Field","name":{"kind":"Name","value":"stoppedAt"}},{"kind":"Field","name":{"kind":"Name","value":"failureReason"}},{"kind":"Field","name":{"kind":"Name","value":"project"},"selectionSet":{"kind":"SelectionSet","selections":[{"kind":"Field","name":{"kind":"Name","value":"id"}},{"kind":"Field","name":{"kind":"Name","value":"projectId"}},{"kind":"Field","name":{"kind":"Name","value":"name"}}]}}]}}]} as unknown as DocumentNode<CliCreateSessionMutation, CliCreateSessionMutationVariables>;
export const CliStopSessionDocument = {"kind":"Document","definitions":[{"kind":"OperationDefinition","operation":"mutation","name":{"kind":"Name","value":"CliStopSession"},"variableDefinitions":[{"kind":"VariableDefinition","variable":{"kind":"Variable","name":{"kind":"Name","value":"input"}},"type":{"kind":"NonNullType","type":{"kind":"NamedType","name":{"kind":"Name","value":"StopSessionInput"}}}}],"selectionSet":{"kind":"SelectionSet","selections":[{"kind":"Field","name":{"kind":"Name","value":"stopSession"},"arguments":[{"kind":"Argument","name":{"kind":"Name","value":"input"},"value":{"kind":"Variable","name":{"kind":"Name","value":"input"}}}],"selectionSet":{"kind":"SelectionSet","selections":[{"kind":"Field","name":{"kind":"Name","value":"__typename"}},{"kind":"InlineFragment","typeCondition":{"kind":"NamedType","name":{"kind":"Name","value":"StopSessionSuccess"}},"selectionSet":{"kind":"SelectionSet","selections":[{"kind":"Field","name":{"kind":"Name","value":"session"},"selectionSet":{"kind":"SelectionSet","selections":[{"kind":"FragmentSpread","name":{"kind":"Name","value":"CliSession"}}]}}]}},{"kind":"InlineFragment","typeCondition":{"kind":"NamedType","name":{"kind":"Name","value":"Error"}},"selectionSet":{"kind":"SelectionSet","selections":[{"kind":"Field","name":{"kind":"Name","value":"code"}},{"kind":"Field","name":{"kind":"Name","value":"message"}}]}}]}}]}},{"kind":"FragmentDefinition","name":{"kind":"Name","value":"CliSession"},"typeCondition":{"kind":"NamedType","name":{"kind":"Name","value":"Session"}},"selectionSet":{"kind":"SelectionSet","selections":[{"kind":"Field","name":{"kind":"Name","value":"id"}},{"kind":"Field","name":{"kind":"Name","value":"sessionId"}},{"kind":"Field","name":{"kind":"Name","value":"status"}},{"kind":"Field","name":{"kind":"Name","value":"branchName"}},{"kind":"Field","name":{"kind":"Name","value":"baseRef"}},{"kind":"Field","name":{"kind":"Name","value":"agent"}},{"kind":"Field","name":{"kind":"Name","value":"createdAt"}},{"kind":"Field","name":{"kind":"Name","value":"stoppedAt"}},{"kind":"Field","name":{"kind":"Name","value":"failureReason"}},{"kind":"Field","name":{"kind":"Name","value":"project"},"selectionSet":{"kind":"SelectionSet","selections":[{"kind":"Field","name":{"kind":"Name","value":"id"}},{"kind":"Field","name":{"kind":"Name","value":"projectId"}},{"kind":"Field","name":{"kind":"Name","value":"name"}}]}}]}}]} as unknown as DocumentNode<CliStopSessionMutation, CliStopSessionMutationVariables>;
export const CliReloadSessionDocument = {"kind":"Document","definitions":[{"kind":"OperationDefinition","operation":"mutation","name":{"kind":"Name","value":"CliReloadSession"},"variableDefinitions":[{"kind":"VariableDefinition","variable":{"kind":"Variable","name":{"kind":"Name","value":"input"}},"type":{"kind":"NonNullType","type":{"kind":"NamedType","name":{"kind":"Name","value":"ReloadSessionInput"}}}}],"selectionSet":{"kind":"SelectionSet","selections":[{"kind":"Field","name":{"kind":"Name","value":"reloadSession"},"arguments":[{"kind":"Argument","name":{"kind":"Name","value":"input"},"value":{"kind":"Variable","name":{"kind":"Name","value":"input"}}}],"selectionSet":{"kind":"SelectionSet","selections":[{"kind":"Field","name":{"kind":"Name","value":"__typename"}},{"kind":"InlineFragment","typeCondition":{"kind":"NamedType","name":{"kind":"Name","value":"ReloadSessionSuccess"}},"selectionSet":{"kind":"SelectionSet","selections":[{"kind":"Field","name":{"kind":"Name","value":"reload"},"selectionSet":{"kind":"SelectionSet","selections":[{"kind":"FragmentSpread","name":{"kind":"Name","value":"CliReload"}}]}}]}},{"kind":"InlineFragment","typeCondition":{"kind":"NamedType","name":{"kind":"Name","value":"Error"}},"selectionSet":{"kind":"SelectionSet","selections":[{"kind":"Field","name":{"kind":"Name","value":"code"}},{"kind":"Field","name":{"kind":"Name","value":"message"}}]}}]}}]}},{"kind":"FragmentDefinition","name":{"kind":"Name","value":"CliReload"},"typeCondition":{"kind":"NamedType","name":{"kind":"Name","value":"Reload"}},"selectionSet":{"kind":"SelectionSet","selections":[{"kind":"Field","name":{"kind":"Name","value":"id"}},{"kind":"Field","name":{"kind":"Name","value":"status"}},{"kind":"Field","name":{"kind":"Name","value":"error"}},{"kind":"Field","name":{"kind":"Name","value":"noRepo"}},{"kind":"Field","name":{"kind":"Name","value":"force"}},{"kind":"Field","name":{"kind":"Name","value":"phases"},"selectionSet":{"kind":"SelectionSet","selections":[{"kind":"Field","name":{"kind":"Name","value":"name"}},{"kind":"Field","name":{"kind":"Name","value":"status"}},{"kind":"Field","name":{"kind":"Name","value":"message"}},{"kind":"Field","name":{"kind":"Name","value":"at"}}]}}]}}]} as unknown as DocumentNode<CliReloadSessionMutation, CliReloadSessionMutationVariables>;
export const CliReloadProgressDocument = {"kind":"Document","definitions":[{"kind":"OperationDefinition","operation":"subscription","name":{"kind":"Name","value":"CliReloadProgress"},"variableDefinitions":[{"kind":"VariableDefinition","variable":{"kind":"Variable","name":{"kind":"Name","value":"reloadId"}},"type":{"kind":"NonNullType","type":{"kind":"NamedType","name":{"kind":"Name","value":"ID"}}}},{"kind":"VariableDefinition","variable":{"kind":"Variable","name":{"kind":"Name","value":"after"}},"type":{"kind":"NamedType","name":{"kind":"Name","value":"Int"}}}],"selectionSet":{"kind":"SelectionSet","selections":[{"kind":"Field","name":{"kind":"Name","value":"reloadProgress"},"arguments":[{"kind":"Argument","name":{"kind":"Name","value":"reloadId"},"value":{"kind":"Variable","name":{"kind":"Name","value":"reloadId"}}},{"kind":"Argument","name":{"kind":"Name","value":"after"},"value":{"kind":"Variable","name":{"kind":"Name","value":"after"}}}],"selectionSet":{"kind":"SelectionSet","selections":[{"kind":"FragmentSpread","name":{"kind":"Name","value":"CliReload"}}]}}]}},{"kind":"FragmentDefinition","name":{"kind":"Name","value":"CliReload"},"typeCondition":{"kind":"NamedType","name":{"kind":"Name","value":"Reload"}},"selectionSet":{"kind":"SelectionSet","selections":[{"kind":"Field","name":{"kind":"Name","value":"id"}},{"kind":"Field","name":{"kind":"Name","value":"status"}},{"kind":"Field","name":{"kind":"Name","value":"error"}},{"kind":"Field","name":{"kind":"Name","value":"noRepo"}},{"kind":"Field","name":{"kind":"Name","value":"force"}},{"kind":"Field","name":{"kind":"Name","value":"phases"},"selectionSet":{"kind":"SelectionSet","selections":[{"kind":"Field","name":{"kind":"Name","value":"name"}},{"kind":"Field","name":{"kind":"Name","value":"status"}},{"kind":"Field","name":{"kind":"Name","value":"message"}},{"kind":"Field","name":{"kind":"Name","value":"at"}}]}}]}}]} as unknown as DocumentNode<CliReloadProgressSubscription, CliReloadProgressSubscriptionVariables>;
export const CliOpenChangeRequestDocument = {"kind":"Document","definitions":[{"kind":"OperationDefinition","operation":"mutation","name":{"kind":"Name","value":"CliOpenChangeRequest"},"variableDefinitions":[{"kind":"VariableDefinition","variable":{"kind":"Variable","name":{"kind":"Name","value":"input"}},"type":{"kind":"NonNullType","type":{"kind":"NamedType","name":{"kind":"Name","value":"OpenChangeRequestInput"}}}}],"selectionSet":{"kind":"SelectionSet","selections":[{"kind":"Field","name":{"kind":"Name","value":"openChangeRequest"},"arguments":[{"kind":"Argument","name":{"kind":"Name","value":"input"},"value":{"kind":"Variable","name":{"kind":"Name","value":"input"}}}],"selectionSet":{"kind":"SelectionSet","selections":[{"kind":"Field","name":{"kind":"Name","value":"__typename"}},{"kind":"InlineFragment","typeCondition":{"kind":"NamedType","name":{"kind":"Name","value":"OpenChangeRequestSuccess"}},"selectionSet":{"kind":"SelectionSet","selections":[{"kind":"Field","name":{"kind":"Name","value":"changeRequest"},"selectionSet":{"kind":"SelectionSet","selections":[{"kind":"FragmentSpread","name":{"kind":"Name","value":"CliChangeRequest"}}]}}]}},{"kind":"InlineFragment","typeCondition":{"kind":"NamedType","name":{"kind":"Name","value":"Error"}},"selectionSet":{"kind":"SelectionSet","selections":[{"kind":"Field","name":{"kind":"Name","value":"code"}},{"kind":"Field","name":{"kind":"Name","value":"message"}}]}}]}}]}},{"kind":"FragmentDefinition","name":{"kind":"Name","value":"CliChangeRequest"},"typeCondition":{"kind":"NamedType","name":{"kind":"Name","value":"ChangeRequest"}},"selectionSet":{"kind":"SelectionSet","selections":[{"kind":"Field","name":{"kind":"Name","value":"id"}},{"kind":"Field","name":{"kind":"Name","value":"changeRequestId"}},{"kind":"Field","name":{"kind":"Name","value":"title"}},{"kind":"Field","name":{"kind":"Name","value":"status"}},{"kind":"Field","name":{"kind":"Name","value":"headRef"}},{"kind":"Field","name":{"kind":"Name","value":"baseRef"}},{"kind":"Field","name":{"kind":"Name","value":"headCommit"}},{"kind":"Field","name":{"kind":"Name","value":"baseCommit"}},{"kind":"Field","name":{"kind":"Name","value":"mergeCommit"}},{"kind":"Field","name":{"kind":"Name","value":"mergeMethod"}},{"kind":"Field","name":{"kind":"Name","value":"filesChanged"}},{"kind":"Field","name":{"kind":"Name","value":"additions"}},{"kind":"Field","name":{"kind":"Name","value":"deletions"}},{"kind":"Field","name":{"kind":"Name","value":"mergeable"}},{"kind":"Field","name":{"kind":"Name","value":"conflicts"}}]}}]} as unknown as DocumentNode<CliOpenChangeRequestMutation, CliOpenChangeRequestMutationVariables>;
export const CliMergeChangeRequestDocument = {"kind":"Document","definitions":[{"kind":"OperationDefinition","operation":"mutation","name":{"kind":"Name","value":"CliMergeChangeRequest"},"variableDefinitions":[{"kind":"VariableDefinition","variable":{"kind":"Variable","name":{"kind":"Name","value":"input"}},"type":{"kind":"NonNullType","type":{"kind":"NamedType","name":{"kind":"Name","value":"MergeChangeRequestInput"}}}}],"selectionSet":{"kind":"SelectionSet","selections":[{"kind":"Field","name":{"kind":"Name","value":"mergeChangeRequest"},"arguments":[{"kind":"Argument","name":{"kind":"Name","value":"input"},"value":{"kind":"Variable","name":{"kind":"Name","value":"input"}}}],"selectionSet":{"kind":"SelectionSet","selections":[{"kind":"Field","name":{"kind":"Name","value":"__typename"}},{"kind":"InlineFragment","typeCondition":{"kind":"NamedType","name":{"kind":"Name","value":"MergeChangeRequestSuccess"}},"selectionSet":{"kind":"SelectionSet","selections":[{"kind":"Field","name":{"kind":"Name","value":"changeRequest"},"selectionSet":{"kind":"SelectionSet","selections":[{"kind":"FragmentSpread","name":{"kind":"Name","value":"CliChangeRequest"}}]}}]}},{"kind":"InlineFragment","typeCondition":{"kind":"NamedType","name":{"kind":"Name","value":"Error"}},"selectionSet":{"kind":"SelectionSet","selections":[{"kind":"Field","name":{"kind":"Name","value":"code"}},{"kind":"Field","name":{"kind":"Name","value":"message"}}]}}]}}]}},{"kind":"FragmentDefinition","name":{"kind":"Name","value":"CliChangeRequest"},"typeCondition":{"kind":"NamedType","name":{"kind":"Name","value":"ChangeRequest"}},"selectionSet":{"kind":"SelectionSet","selections":[{"kind":"Field","name":{"kind":"Name","value":"id"}},{"kind":"Field","name":{"kind":"Name","value":"changeRequestId"}},{"kind":"Field","name":{"kind":"Name","value":"title"}},{"kind":"Field","name":{"kind":"Name","value":"status"}},{"kind":"Field","name":{"kind":"Name","value":"headRef"}},{"kind":"Field","name":{"kind":"Name","value":"baseRef"}},{"kind":"Field","name":{"kind":"Name","value":"headCommit"}},{"kind":"Field","name":{"kind":"Name","value":"baseCommit"}},{"kind":"Field","name":{"kind":"Name","value":"mergeCommit"}},{"kind":"Field","name":{"kind":"Name","value":"mergeMethod"}},{"kind":"Field","name":{"kind":"Name","value":"filesChanged"}},{"kind":"Field","name":{"kind":"Name","value":"additions"}},{"kind":"Field","name":{"kind":"Name","value":"deletions"}},{"kind":"Field","name":{"kind":"Name","value":"mergeable"}},{"kind":"Field","name":{"kind":"Name","value":"conflicts"}}]}}]} as unknown as DocumentNode<CliMergeChangeRequestMutation, CliMergeChangeRequestMutationVariables>;
export const CliCreatePersonalAccessTokenDocument = {"kind":"Document","definitions":[{"kind":"OperationDefinition","operation":"mutation","name":{"kind":"Name","value":"CliCreatePersonalAccessToken"},"variableDefinitions":[{"kind":"VariableDefinition","variable":{"kind":"Variable","name":{"kind":"Name","value":"input"}},"type":{"kind":"NonNullType","type":{"kind":"NamedType","name":{"kind":"Name","value":"CreateTokenInput"}}}}],"selectionSet":{"kind":"SelectionSet","selections":[{"kind":"Field","name":{"kind":"Name","value":"createPersonalAccessToken"},"arguments":[{"kind":"Argument","name":{"kind":"Name","value":"input"},"value":{"kind":"Variable","name":{"kind":"Name","value":"input"}}}],"selectionSet":{"kind":"SelectionSet","selections":[{"kind":"Field","name":{"kind":"Name","value":"__typename"}},{"kind":"InlineFragment","typeCondition":{"kind":"NamedType","name":{"kind":"Name","value":"CreateTokenSuccess"}},"selectionSet":{"kind":"SelectionSet","selections":[{"kind":"Field","name":{"kind":"Name","value":"secret"}},{"kind":"Field","name":{"kind":"Name","value":"token"},"selectionSet":{"kind":"SelectionSet","selections":[{"kind":"FragmentSpread","name":{"kind":"Name","value":"CliToken"}}]}}]}},{"kind":"InlineFragment","typeCondition":{"kind":"NamedType","name":{"kind":"Name","value":"Error"}},"selectionSet":{"kind":"SelectionSet","selections":[{"kind":"Field","name":{"kind":"Name","value":"code"}},{"kind":"Field","name":{"kind":"Name","value":"message"}}]}}]}}]}},{"kind":"FragmentDefinition","name":{"kind":"Name","value":"CliToken"},"typeCondition":{"kind":"NamedType","name":{"kind":"Name","value":"Token"}},"selectionSet":{"kind":"SelectionSet","selections":[{"kind":"Field","name":{"kind":"Name","value":"id"}},{"kind":"Field","name":{"kind":"Name","value":"kind"}},{"kind":"Field","name":{"kind":"Name","value":"name"}},{"kind":"Field","name":{"kind":"Name","value":"prefix"}},{"kind":"Field","name":{"kind":"Name","value":"scopes"}},{"kind":"Field","name":{"kind":"Name","value":"createdAt"}},{"kind":"Field","name":{"kind":"Name","value":"expiresAt"}},{"kind":"Field","name":{"kind":"Name","value":"revokedAt"}}]}}]} as unknown as DocumentNode<CliCreatePersonalAccessTokenMutation, CliCreatePersonalAccessTokenMutationVariables>;
export const CliCreateServiceAccountTokenDocument = {"kind":"Document","definitions":[{"kind":"OperationDefinition","operation":"mutation","name":{"kind":"Name","value":"CliCreateServiceAccountToken"},"variableDefinitions":[{"kind":"VariableDefinition","variable":{"kind":"Variable","name":{"kind":"Name","value":"input"}},"type":{"kind":"NonNullType","type":{"kind":"NamedType","name":{"kind":"Name","value":"CreateTokenInput"}}}}],"selectionSet":{"kind":"SelectionSet","selections":[{"kind":"Field","name":{"kind":"Name","value":"createServiceAccountToken"},"arguments":[{"kind":"Argument","name":{"kind":"Name","value":"input"},"value":{"kind":"Variable","name":{"kind":"Name","value":"input"}}}],"selectionSet":{"kind":"SelectionSet","selections":[{"kind":"Field","name":{"kind":"Name","value":"__typename"}},{"kind":"InlineFragment","typeCondition":{"kind":"NamedType","name":{"kind":"Name","value":"CreateTokenSuccess"}},"selectionSet":{"kind":"SelectionSet","selections":[{"kind":"Field","name":{"kind":"Name","value":"secret"}},{"kind":"Field","name":{"kind":"Name","value":"token"},"selectionSet":{"kind":"SelectionSet","selections":[{"kind":"FragmentSpread","name":{"kind":"Name","value":"CliToken"}}]}}]}},{"kind":"InlineFragment","typeCondition":{"kind":"NamedType","name":{"kind":"Name","value":"Error"}},"selectionSet":{"kind":"SelectionSet","selections":[{"kind":"Field","name":{"kind":"Name","value":"code"}},{"kind":"Field","name":{"kind":"Name","value":"message"}}]}}]}}]}},{"kind":"FragmentDefinition","name":{"kind":"Name","value":"CliToken"},"typeCondition":{"kind":"NamedType","name":{"kind":"Name","value":"Token"}},"selectionSet":{"kind":"SelectionSet","selections":[{"kind":"Field","name":{"kind":"Name","value":"id"}},{"kind":"Field","name":{"kind":"Name","value":"kind"}},{"kind":"Field","name":{"kind":"Name","value":"name"}},{"kind":"Field","name":{"kind":"Name","value":"prefix"}},{"kind":"Field","name":{"kind":"Name","value":"scopes"}},{"kind":"Field","name":{"kind":"Name","value":"createdAt"}},{"kind":"Field","name":{"kind":"Name","value":"expiresAt"}},{"kind":"Field","name":{"kind":"Name","value":"revokedAt"}}]}}]} as unknown as DocumentNode<CliCreateServiceAccountTokenMutation, CliCreateServiceAccountTokenMutationVariables>;
export const CliRevokeTokenDocument = {"kind":"Document","definitions":[{"kind":"OperationDefinition","operation":"mutation","name":{"kind":"Name","value":"CliRevokeToken"},"variableDefinitions":[{"kind":"VariableDefinition","variable":{"kind":"Variable","name":{"kind":"Name","value":"input"}},"type":{"kind":"NonNullType","type":{"kind":"NamedType","name":{"kind":"Name","value":"RevokeTokenInput"}}}}],"selectionSet":{"kind":"SelectionSet","selections":[{"kind":"Field","name":{"kind":"Name","value":"revokeToken"},"arguments":[{"kind":"Argument","name":{"kind":"Name","value":"input"},"value":{"kind":"Variable","name":{"kind":"Name","value":"input"}}}],"selectionSet":{"kind":"SelectionSet","selections":[{"kind":"Field","name":{"kind":"Name","value":"__typename"}},{"kind":"InlineFragment","typeCondition":{"kind":"NamedType","name":{"kind":"Name","value":"RevokeTokenSuccess"}},"selectionSet":{"kind":"SelectionSet","selections":[{"kind":"Field","name":{"kind":"Name","value":"token"},"selectionSet":{"kind":"SelectionSet","selections":[{"kind":"FragmentSpread","name":{"kind":"Name","value":"CliToken"}}]}}]}},{"kind":"InlineFragment","typeCondition":{"kind":"NamedType","name":{"kind":"Name","value":"Error"}},"selectionSet":{"kind":"SelectionSet","selections":[{"kind":"Field","name":{"kind":"Name","value":"code"}},{"kind":"Field","name":{"kind":"Name","value":"message"}}]}}]}}]}},{"kind":"FragmentDefinition","name":{"kind":"Name","value":"CliToken"},"typeCondition":{"kind":"NamedType","name":{"kind":"Name","value":"Token"}},"selectionSet":{"kind":"SelectionSet","selections":[{"kind":"Field","name":{"kind":"Name","value":"id"}},{"kind":"Field","name":{"kind":"Name","value":"kind"}},{"kind":"Field","name":{"kind":"Name","value":"name"}},{"kind":"Field","name":{"kind":"Name","value":"prefix"}},{"kind":"Field","name":{"kind":"Name","value":"scopes"}},{"kind":"Field","name":{"kind":"Name","value":"createdAt"}},{"kind":"Field","name":{"kind":"Name","value":"expiresAt"}},{"kind":"Field","name":{"kind":"Name","value":"revokedAt"}}]}}]} as unknown as DocumentNode<CliRevokeTokenMutation, CliRevokeTokenMutationVariables>;