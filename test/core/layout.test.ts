// The layering rules in biome.json (`npm run lint`): dependencies point one way, schema → resolvers →
// (image, contract, db); the daemon and the control plane meet only in contract/. Each case lints one
// file at that path in a scratch copy of the layout with the project's biome.json, so the tree is
// never written to. Biome sees cycles between files only; the domain folders of resolvers/ must not
// form one either (checked here on the imports of the tree), and none of their files exceeds 700 lines.
// schema/ calls services and never the database: its context type leaves the client out, and no
// line there but the prisma plugin's wiring names it.
import { spawnSync } from 'node:child_process';
import {
  copyFileSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  writeFileSync,
} from 'node:fs';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { dirname, join, normalize, relative } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, describe, expect, expectTypeOf, it } from 'vitest';
import type { Context } from '../../schema/builder';
import type { SchemaServices, Services } from '../../resolvers/services';

const biome = createRequire(import.meta.url).resolve('@biomejs/biome/bin/biome');
const scratch = mkdtempSync(join(tmpdir(), 'sc-layout-'));
copyFileSync(new URL('../../biome.json', import.meta.url), join(scratch, 'biome.json'));
afterAll(() => rmSync(scratch, { recursive: true, force: true }));

const root = fileURLToPath(new URL('../..', import.meta.url));
const MAX_RESOLVER_FILE_LINES = 700;

/** Every .ts file under resolvers/, as a path relative to the root and its source. */
function resolverFiles(): Array<{ path: string; source: string }> {
  return readdirSync(join(root, 'resolvers'), { recursive: true, encoding: 'utf8' })
    .filter((name) => name.endsWith('.ts'))
    .map((name) => {
      const path = join('resolvers', name);
      return { path, source: readFileSync(join(root, path), 'utf8') };
    });
}

/** Every .ts file under `dirs`, as a path relative to the root and its source. */
function sourceFiles(dirs: readonly string[]): Array<{ path: string; source: string }> {
  return dirs.flatMap((dir) =>
    readdirSync(join(root, dir), { recursive: true, encoding: 'utf8' })
      .filter((name) => name.endsWith('.ts'))
      .map((name) => {
        const path = join(dir, name);
        return { path, source: readFileSync(join(root, path), 'utf8') };
      }),
  );
}

/**
 * What a database call in schema/ looks like: the client (`db`, services.database) however reached, a
 * Prisma delegate's query method, raw SQL or a transaction, a client of its own.
 */
const DB_ACCESS = [
  /\bdb\b/,
  /\.database\b/,
  /\.(?:findUnique|findUniqueOrThrow|findFirst|findFirstOrThrow|findMany|createMany|updateMany|deleteMany|upsert|aggregate|groupBy)\(/,
  /\$(?:queryRaw|executeRaw|queryRawUnsafe|executeRawUnsafe|transaction)\b/,
  /\bPrismaClient\b/,
];

/** The one line of schema/ that may name the client: the prisma plugin's own wiring. */
const PLUGIN_CLIENT = {
  path: 'schema/builder.ts',
  line: 'client: (ctx) => (ctx as ServerContext).services.db,',
};

/** `path:line: text` for every line of schema/ that reaches the database itself. */
function schemaDbCalls(files: ReadonlyArray<{ path: string; source: string }>): string[] {
  const found: string[] = [];
  for (const file of files) {
    file.source.split('\n').forEach((line, index) => {
      const text = line.trim();
      if (normalize(file.path) === PLUGIN_CLIENT.path && text === PLUGIN_CLIENT.line) return;
      if (DB_ACCESS.some((pattern) => pattern.test(text))) found.push(`${file.path}:${index + 1}: ${text}`);
    });
  }
  return found;
}

/**
 * The modules allowed to look at a caller's kind, scopes or admin flag: the policy that decides, and
 * the principal/token modules that build and describe a credential.
 */
const POLICY_MODULES = new Set([
  'resolvers/auth/policy.ts',
  'resolvers/auth/principal.ts',
  'resolvers/auth/tokens.ts',
]);

/** What a check that bypasses the policy looks like: a caller-kind comparison, a scope or admin test. */
const BYPASS = [
  /\.kind\s*[!=]==?\s*['"](?:SANDBOX|USER|SERVICE_ACCOUNT)['"]/,
  /['"](?:SANDBOX|USER|SERVICE_ACCOUNT)['"]\s*[!=]==?/,
  /\bcase\s+['"](?:SANDBOX|USER|SERVICE_ACCOUNT)['"]/,
  /\.scopes\.has\(/,
  /\.isAdmin\b/,
  /\bhasScope\(/,
];

/** `path:line: text` for every line outside the policy modules that decides on its own. */
function policyBypasses(files: ReadonlyArray<{ path: string; source: string }>): string[] {
  const found: string[] = [];
  for (const file of files) {
    if (POLICY_MODULES.has(normalize(file.path))) continue;
    file.source.split('\n').forEach((line, index) => {
      if (BYPASS.some((pattern) => pattern.test(line)))
        found.push(`${file.path}:${index + 1}: ${line.trim()}`);
    });
  }
  return found;
}

const RELATIVE_IMPORT = /(?:\bfrom|\bimport)\s*\(?\s*['"](\.{1,2}\/[^'"]+)['"]/g;

/**
 * Cycles between the domain folders of resolvers/ (resolvers/<domain>/…), type-only imports included,
 * each written `a → b → a`; empty when the domains form a directed acyclic graph.
 */
function domainCycles(files: ReadonlyArray<{ path: string; source: string }>): string[] {
  const domainOf = (path: string): string | null => {
    const parts = normalize(path).split('/');
    return parts[0] === 'resolvers' && parts.length > 2 ? parts[1]! : null;
  };
  const edges = new Map<string, Set<string>>();
  for (const file of files) {
    const from = domainOf(file.path);
    if (!from) continue;
    for (const match of file.source.matchAll(RELATIVE_IMPORT)) {
      const to = domainOf(relative('.', join(dirname(file.path), match[1]!)));
      if (!to || to === from) continue;
      if (!edges.has(from)) edges.set(from, new Set());
      edges.get(from)!.add(to);
    }
  }
  const cycles = new Set<string>();
  const done = new Set<string>();
  const visit = (domain: string, path: string[]): void => {
    const at = path.indexOf(domain);
    if (at >= 0) {
      const loop = path.slice(at);
      const start = loop.indexOf([...loop].sort()[0]!);
      const rotated = [...loop.slice(start), ...loop.slice(0, start)];
      cycles.add([...rotated, rotated[0]].join(' → '));
      return;
    }
    if (done.has(domain)) return;
    for (const next of edges.get(domain) ?? []) visit(next, [...path, domain]);
    done.add(domain);
  };
  for (const domain of [...edges.keys()].sort()) visit(domain, []);
  return [...cycles].sort();
}

function lint(path: string, source: string): { ok: boolean; output: string } {
  const file = join(scratch, path);
  mkdirSync(dirname(file), { recursive: true });
  writeFileSync(file, source);
  const run = spawnSync(process.execPath, [biome, 'lint', '--max-diagnostics=50', path], {
    cwd: scratch,
    encoding: 'utf8',
  });
  rmSync(file);
  return { ok: run.status === 0, output: `${run.stdout}${run.stderr}` };
}

describe('layering', () => {
  it.each([
    [
      'resolvers/sessions/x.ts',
      "import type { ServerEnv } from '../../server/env';",
      'Dependencies point one way',
    ],
    ['resolvers/x.ts', "import { schema } from '../schema/index';", 'Dependencies point one way'],
    [
      'resolvers/sessions/x.ts',
      "import { findManySql } from '../../server/fast-paths/find-many-sql';",
      'Dependencies point one way',
    ],
    ['schema/x.ts', "import { createPubSub } from '../server/pubsub';", 'Schema files call services'],
    [
      'image/x.ts',
      "import type { SandboxProvider } from '../resolvers/providers/types';",
      'image/ is a leaf',
    ],
    ['agent/x.ts', "import { createServices } from '../resolvers/services';", 'shares only contract/'],
    ['contract/x.ts', "import { ApiClient } from '../agent/api-client';", 'depends on neither'],
    ['web/src/x.ts', "import { buildApp } from '../../server/app';", 'public GraphQL API only'],
    ['web/src/x.ts', "import { SCOPES } from '../../resolvers/auth/principal';", 'public GraphQL API only'],
  ])('a file at %s is refused `%s`', (path, source, message) => {
    const result = lint(path, `${source}\nexport const used = 1;\n`);
    expect(result.ok).toBe(false);
    expect(result.output).toContain('noRestrictedImports');
    expect(result.output).toContain(message);
  });

  it.each([
    ['schema/x.ts', "import type { Services } from '../resolvers/services';"],
    ['resolvers/x.ts', "import type { HardwareSpec } from '../image/spec';"],
    ['agent/x.ts', "import type { RuntimeState } from '../contract/daemon-api';"],
    ['server/x.ts', "import { createServices } from '../resolvers/services';"],
    ['web/src/x.ts', "import { ViewerDocument } from './generated/graphql';"],
  ])('a file at %s may write `%s`', (path, source) => {
    const result = lint(path, `${source}\nexport type Used = unknown;\n`);
    expect(result.output).not.toContain('noRestrictedImports');
  });

  it('an import cycle fails lint, type-only imports included', () => {
    const other = join(scratch, 'resolvers/cycle-b.ts');
    mkdirSync(dirname(other), { recursive: true });
    writeFileSync(other, "import type { A } from './cycle-a';\nexport type B = A[];\n");
    try {
      const result = lint(
        'resolvers/cycle-a.ts',
        "import type { B } from './cycle-b';\nexport type A = { b?: B };\n",
      );
      expect(result.ok).toBe(false);
      expect(result.output).toContain('noImportCycles');
    } finally {
      rmSync(other);
    }
  });

  it('the domain folders of resolvers/ import each other without a cycle', () => {
    expect(domainCycles(resolverFiles())).toEqual([]);
  });

  it('an import that closes a cycle between domain folders fails, type-only included', () => {
    const files = [
      ...resolverFiles(),
      // events/ is below sessions/ (sessions publish through it): a type from sessions closes a loop.
      {
        path: 'resolvers/events/x.ts',
        source:
          "import type { SessionLifecycle } from '../sessions/lifecycle';\nexport type X = SessionLifecycle;\n",
      },
    ];
    expect(domainCycles(files)).toContain('events → sessions → events');
  });

  it(`no file in resolvers/ exceeds ${MAX_RESOLVER_FILE_LINES} lines`, () => {
    const long = resolverFiles()
      .map((file) => ({ path: file.path, lines: file.source.split('\n').length - 1 }))
      .filter((file) => file.lines > MAX_RESOLVER_FILE_LINES);
    expect(long).toEqual([]);
  });
});

describe('one authorisation policy (R-POL-1)', () => {
  const dirs = ['schema', 'resolvers', 'server'];

  it('no file in schema/, resolvers/ or server/ decides on a caller kind or scope outside the policy', () => {
    expect(policyBypasses(sourceFiles(dirs))).toEqual([]);
  });

  it.each([
    ['resolvers/sessions/x.ts', "if (principal.kind === 'SANDBOX') return;"],
    ['schema/x.ts', "if (ctx.principal?.kind !== 'USER') throw forbidden();"],
    ['server/x.ts', "const ok = 'SERVICE_ACCOUNT' === caller.kind;"],
    ['resolvers/gateway/x.ts', "switch (p.kind) { case 'SANDBOX': break; }"],
    ['resolvers/git/x.ts', "if (!principal.scopes.has('projects:write')) deny();"],
    ['schema/x.ts', 'const admin = p.isAdmin;'],
    ['resolvers/x.ts', "if (hasScope(p, 'tokens:read')) list();"],
  ])('a check planted at %s (`%s`) fails the guard', (path, line) => {
    const planted = [...sourceFiles(dirs), { path, source: `export function f() {\n  ${line}\n}\n` }];
    expect(policyBypasses(planted)).toEqual([`${path}:2: ${line}`]);
  });

  it('the policy module itself may compare kinds', () => {
    const policy = sourceFiles(['resolvers/auth']).find((f) => f.path === 'resolvers/auth/policy.ts')!;
    expect(BYPASS.some((pattern) => pattern.test(policy.source))).toBe(true);
    expect(policyBypasses([policy])).toEqual([]);
  });
});

describe('schema/ calls services, never the database (issue 43)', () => {
  it("the schema context's services leave the database out", () => {
    // Compile-time: `npm run typecheck` fails here when Context['services'] gains db or database.
    expectTypeOf<Context['services']>().toEqualTypeOf<SchemaServices>();
    expectTypeOf<SchemaServices>().not.toHaveProperty('db');
    expectTypeOf<SchemaServices>().not.toHaveProperty('database');
    expectTypeOf<Services>().toHaveProperty('db');
  });

  it('no line of schema/ reaches the database but the prisma plugin wiring', () => {
    const files = sourceFiles(['schema']);
    expect(files.find((f) => f.path === PLUGIN_CLIENT.path)?.source).toContain(PLUGIN_CLIENT.line);
    expect(schemaDbCalls(files)).toEqual([]);
  });

  it.each([
    ['schema/x.ts', 'return ctx.services.db.session.findUnique({ where: { id } });'],
    ['schema/x.ts', 'const { db } = ctx.services as Services; return db.token.count();'],
    ['schema/sessions.ts', 'return prisma.session.findMany({ where: { accountId } });'],
    ['schema/x.ts', 'return client.$queryRaw`SELECT 1`;'],
    ['schema/x.ts', 'const raw = ctx.services.database.raw;'],
    ['schema/x.ts', 'const client = new PrismaClient();'],
    ['schema/builder.ts', 'return (ctx as ServerContext).services.db.user.count();'],
  ])('a call planted at %s (`%s`) fails the guard', (path, line) => {
    const planted = [...sourceFiles(['schema']), { path, source: `export function f() {\n  ${line}\n}\n` }];
    expect(schemaDbCalls(planted)).toEqual([`${path}:2: ${line}`]);
  });
});
