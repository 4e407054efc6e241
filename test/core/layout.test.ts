// The layering rules in biome.json (`npm run lint`): dependencies point one way, schema → resolvers →
// (image, contract, db); the daemon and the control plane meet only in contract/. Each case lints one
// file at that path in a scratch copy of the layout with the project's biome.json, so the tree is
// never written to.
import { spawnSync } from 'node:child_process';
import { copyFileSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';

const biome = createRequire(import.meta.url).resolve('@biomejs/biome/bin/biome');
const scratch = mkdtempSync(join(tmpdir(), 'sc-layout-'));
copyFileSync(new URL('../../biome.json', import.meta.url), join(scratch, 'biome.json'));
afterAll(() => rmSync(scratch, { recursive: true, force: true }));

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
});
