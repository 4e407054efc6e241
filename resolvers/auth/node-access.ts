// Read capability of every type that implements Node (R-AUTH-4): `node(id:)` and `nodes(ids:)`
// reach any row by its global id, so each type answers only to a principal that may read it. Types
// whose owner is a relation (Template → Project, Reload → Session, Snapshot → the templates and
// sandboxes that use it) look the owner up once per request.
import type { Db } from '../platform';
import { forbidden } from '../errors';
import { assertCanReadProject, assertCanReadSession } from './authz';
import type { Principal } from './principal';

export interface NodeAccess {
  template(row: { projectId: string }): Promise<void>;
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
  return {
    async template(row) {
      const project = await once(`project:${row.projectId}`, () =>
        db.project.findUnique({ where: { id: row.projectId }, select: { id: true, accountId: true } }),
      );
      if (!project) throw forbidden('That template is not reachable.');
      assertCanReadProject(principal, project);
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
      const used = await once(`snapshot:${row.id}`, () =>
        db.snapshot.count({
          where: {
            id: row.id,
            OR:
              principal.kind === 'SANDBOX'
                ? [
                    { sandboxes: { some: { sessionId: principal.sessionId } } },
                    { templates: { some: { projectId: principal.projectId } } },
                  ]
                : [
                    { sandboxes: { some: { accountId: principal.accountId } } },
                    { templates: { some: { project: { accountId: principal.accountId } } } },
                  ],
          },
        }),
      );
      if (used === 0) throw forbidden('That snapshot is not used by anything this token can read.');
      if (principal.kind !== 'SANDBOX' && !principal.scopes.has('projects:read'))
        throw forbidden('This token lacks the projects:read scope.');
    },
  };
}

const perRequest = new WeakMap<object, NodeAccess>();

/** The NodeAccess of one request context (GraphQL contexts are per operation). */
export function nodeAccessOf(ctx: { principal: Principal | null; services: { db: Db } }): NodeAccess | null {
  if (!ctx.principal) return null;
  let access = perRequest.get(ctx);
  if (!access) {
    access = createNodeAccess(ctx.services.db, ctx.principal);
    perRequest.set(ctx, access);
  }
  return access;
}
