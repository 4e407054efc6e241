// Read capability of every type that implements Node (R-AUTH-4): `node(id:)` and `nodes(ids:)`
// reach any row by its global id, so each type answers only to a principal that may read it. Types
// whose owner is a relation (Template → Project, Reload → Session, Snapshot → the templates and
// sandboxes that use it) look the owner up once per request, and answer at once (no Promise) for
// an owner already looked up: a page of a hundred templates of one project waits once.
import type { Db } from '../platform';
import { forbidden } from '../errors';
import { assertCanReadProject, assertCanReadSession } from './authz';
import type { Principal } from './principal';
import { authorize, reachOf } from './policy';

export interface NodeAccess {
  template(row: { projectId: string }): Promise<void> | undefined;
  /**
   * Projects this request has read with their owning account (a page that joined them): a
   * template of one of them is checked against that row instead of another lookup.
   */
  knownProjects(projects: Iterable<{ id: string; accountId: string }>): void;
  reload(row: { sessionId: string }): Promise<void>;
  snapshot(row: { id: string }): Promise<void>;
}

/** Read checks for one request: owners looked up once, whatever number of rows share them. */
export function createNodeAccess(db: Db, principal: Principal): NodeAccess {
  const memo = new Map<string, Promise<unknown>>();
  const once = <T>(key: string, load: () => Promise<T>): Promise<T> => {
    let value = memo.get(key) as Promise<T> | undefined;
    if (!value) {
      value = load();
      memo.set(key, value);
    }
    return value;
  };
  // Template owners by project id once known (looked up, or read by the request's own page).
  const projects = new Map<string, { id: string; accountId: string } | null>();
  const checkTemplateOwner = (project: { id: string; accountId: string } | null) => {
    if (!project) throw forbidden('That template is not reachable.');
    assertCanReadProject(principal, project);
  };
  return {
    template(row) {
      const known = projects.get(row.projectId);
      if (known !== undefined) {
        checkTemplateOwner(known);
        return undefined;
      }
      return once(`project:${row.projectId}`, async () => {
        const project = await db.project.findUnique({
          where: { id: row.projectId },
          select: { id: true, accountId: true },
        });
        projects.set(row.projectId, project);
        return project;
      }).then(checkTemplateOwner);
    },
    knownProjects(rows) {
      for (const { id, accountId } of rows) projects.set(id, { id, accountId });
    },
    async reload(row) {
      const session = await once(`session:${row.sessionId}`, () =>
        db.session.findUnique({ where: { id: row.sessionId }, select: { id: true, accountId: true } }),
      );
      if (!session) throw forbidden('That reload is not reachable.');
      assertCanReadSession(principal, session);
    },
    async snapshot(row) {
      // Snapshots are content-addressed and shared: readable by whoever uses one, through a template
      // of a readable project or a readable sandbox.
      const reach = reachOf(principal);
      const used = await once(`snapshot:${row.id}`, () =>
        db.snapshot.count({
          where: {
            id: row.id,
            OR:
              reach.kind === 'session'
                ? [
                    { sandboxes: { some: { sessionId: reach.sessionId } } },
                    { templates: { some: { projectId: reach.projectId } } },
                  ]
                : [
                    { sandboxes: { some: { accountId: reach.accountId } } },
                    { templates: { some: { project: { accountId: reach.accountId } } } },
                  ],
          },
        }),
      );
      if (used === 0) throw forbidden('That snapshot is not used by anything this token can read.');
      authorize(principal, 'snapshot.read');
    },
  };
}

/** The projects, with their owning account, that rows joined (`row.project`), for `knownProjects`. */
export function joinedProjects(rows: readonly object[]): { id: string; accountId: string }[] {
  const projects: { id: string; accountId: string }[] = [];
  for (const row of rows) {
    const project = (row as { project?: { id?: unknown; accountId?: unknown } | null }).project;
    if (typeof project?.id === 'string' && typeof project.accountId === 'string')
      projects.push({ id: project.id, accountId: project.accountId });
  }
  return projects;
}

const perRequest = new WeakMap<object, NodeAccess>();

/** Makes the read checks of one request (services.nodeAccess: the database stays in the service). */
export type NodeAccessFactory = (principal: Principal) => NodeAccess;

/** The NodeAccess of one request context (GraphQL contexts are per operation). */
export function nodeAccessOf(ctx: {
  principal: Principal | null;
  services: { nodeAccess: NodeAccessFactory };
}): NodeAccess | null {
  if (!ctx.principal) return null;
  let access = perRequest.get(ctx);
  if (!access) {
    access = ctx.services.nodeAccess(ctx.principal);
    perRequest.set(ctx, access);
  }
  return access;
}
