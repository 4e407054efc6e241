// Rules of the git proxy (R-GIT-1, R-SES-3): who may fetch and push a project's repository through
// `/v1/git/<projectId>.git`, which ref updates a credential may make, and how accepted updates go on
// to the upstream with the server-held credential. The HTTP transport lives in server/git-proxy.ts.
import { GraphQLError } from 'graphql';
import type { Project } from '../../prisma/generated/client/client';
import type { Db } from '../platform';
import type { Logger } from '../platform';
import type { Principal } from '../auth/principal';
import { decide } from '../auth/policy';
import type { TokenService } from '../auth/tokens';
import { isUuid } from '../ids';
import { repoRef } from './project-repo';
import type { GitService, RefUpdate, RefUpdateResult, RepoRef } from './git';

export const ZERO_SHA = '0000000000000000000000000000000000000000';

export type GitServiceName = 'git-upload-pack' | 'git-receive-pack';

/** Thrown when a git request is refused before any git process runs; `status` is the HTTP answer. */
export class GitAccessError extends Error {
  override name = 'GitAccessError';
  constructor(
    readonly status: 400 | 401 | 403 | 404,
    message: string,
  ) {
    super(message);
  }
}

export interface GitGrant {
  principal: Principal;
  project: Project;
  repo: RepoRef;
}

/** One command of a push: `oldSha newSha ref` (zero sha for "absent"). */
export interface PushCommand {
  oldSha: string;
  newSha: string;
  ref: string;
}

export interface GitAccessOptions {
  db: Db;
  tokens: TokenService;
  git: GitService;
  encryptionKey: Buffer;
  logger: Logger;
}

export type GitAccess = ReturnType<typeof createGitAccess>;

/** The token in an `Authorization` header: HTTP Basic (git's credential helpers; the password is the token) or Bearer. */
export function tokenFromAuthorization(header: string | undefined): string | null {
  if (!header) return null;
  const bearer = /^Bearer\s+(\S+)\s*$/i.exec(header);
  if (bearer?.[1]) return bearer[1];
  const basic = /^Basic\s+([A-Za-z0-9+/=]+)\s*$/i.exec(header);
  if (!basic?.[1]) return null;
  const decoded = Buffer.from(basic[1], 'base64').toString('utf8');
  const colon = decoded.indexOf(':');
  const password = colon >= 0 ? decoded.slice(colon + 1) : decoded;
  return password.length > 0 ? password : null;
}

export function createGitAccess(options: GitAccessOptions) {
  const { db, tokens, git } = options;
  const log = options.logger.child({ module: 'git-access' });

  /** The ref update rules (the policy's git.updateRef); null when `command` is allowed, else the refusal. */
  function refusal(grant: GitGrant, command: PushCommand): string | null {
    const decision = decide(grant.principal, 'git.updateRef', {
      ref: command.ref,
      newSha: command.newSha,
      defaultBranch: grant.project.defaultBranch,
    });
    return decision.allowed ? null : decision.message;
  }

  return {
    refusal,

    /** Authenticates a git request and checks the caller may use `service` on the project. */
    async authorize(
      authorization: string | undefined,
      projectId: string,
      service: GitServiceName,
    ): Promise<GitGrant> {
      const token = tokenFromAuthorization(authorization);
      if (!token) throw new GitAccessError(401, 'Authentication required: use SINGULACOMP_TOKEN or a PAT.');
      let principal: Principal | null;
      try {
        principal = await tokens.authenticate(`Bearer ${token}`);
      } catch (error) {
        if (error instanceof GraphQLError) throw new GitAccessError(401, error.message);
        throw error;
      }
      if (!principal) throw new GitAccessError(401, 'Authentication required.');
      const notFound = new GitAccessError(404, 'No such project repository for this credential.');
      if (!isUuid(projectId)) throw notFound;
      const project = await db.project.findUnique({ where: { id: projectId.toLowerCase() } });
      if (!project) throw notFound;
      const decision = decide(principal, service === 'git-receive-pack' ? 'git.push' : 'git.fetch', project);
      if (!decision.allowed) throw new GitAccessError(decision.status === 404 ? 404 : 403, decision.message);
      return { principal, project, repo: repoRef(project, options.encryptionKey) };
    },

    /** Sends updates the mirror accepted on to the upstream; the proxy answers with this verdict. */
    async forward(grant: GitGrant, commands: readonly PushCommand[]): Promise<RefUpdateResult[]> {
      const updates: RefUpdate[] = commands.map((command) => ({
        ref: command.ref,
        oldSha: command.oldSha === ZERO_SHA ? null : command.oldSha,
        newSha: command.newSha,
      }));
      const results = await git.pushToUpstream(grant.repo, updates);
      for (const result of results) {
        log.info(
          { projectId: grant.project.id, principal: grant.principal.kind, ref: result.ref, ok: result.ok },
          'push forwarded upstream',
        );
      }
      return results;
    },
  };
}
