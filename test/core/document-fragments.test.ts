// The CLI, the dashboard and the tests select shared things through one set of fragments
// (contract/documents/fragments.graphql). This fails when a document spells out half or more of a
// shared fragment's fields (`id` aside) instead of spreading it, and when a consumer that selects a
// fragment's type never uses the fragment.
import { readFileSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import {
  type DocumentNode,
  type FragmentDefinitionNode,
  Kind,
  TypeInfo,
  buildSchema,
  isAbstractType,
  isObjectType,
  parse,
  visit,
  visitWithTypeInfo,
} from 'graphql';
import { describe, expect, test } from 'vitest';

const ROOT = new URL('../../', import.meta.url).pathname;
const schema = buildSchema(readFileSync(join(ROOT, 'schema.graphql'), 'utf8'));
const shared = parse(readFileSync(join(ROOT, 'contract/documents/fragments.graphql'), 'utf8'));

const graphqlFiles = (dir: string): string[] =>
  readdirSync(join(ROOT, dir), { recursive: true, encoding: 'utf8' })
    .filter((file) => file.endsWith('.graphql'))
    .map((file) => join(dir, file))
    .sort();

const CONSUMERS: Record<string, string[]> = {
  cli: ['contract/documents/cli.graphql'],
  dashboard: graphqlFiles('web/src'),
  tests: graphqlFiles('test/documents'),
};

type Fragment = { name: string; type: string; fields: Set<string>; spreads: Set<string> };

/** Each shared fragment: its type condition, its own fields (`id` aside) and the fragments it spreads. */
function fragmentsOf(document: DocumentNode): Fragment[] {
  return document.definitions
    .filter((def): def is FragmentDefinitionNode => def.kind === Kind.FRAGMENT_DEFINITION)
    .map((def) => {
      const fields = new Set<string>();
      const spreads = new Set<string>();
      for (const selection of def.selectionSet.selections) {
        if (selection.kind === Kind.FIELD && selection.name.value !== 'id') fields.add(selection.name.value);
      }
      visit(def.selectionSet, { FragmentSpread: (node) => void spreads.add(node.name.value) });
      return { name: def.name.value, type: def.typeCondition.name.value, fields, spreads };
    });
}

const applies = (fragment: Fragment, type: string) => {
  const condition = schema.getType(fragment.type);
  const parent = schema.getType(type);
  if (!condition || !parent) return false;
  if (condition === parent) return true;
  return isAbstractType(condition) && isObjectType(parent) && schema.isSubType(condition, parent);
};

type Finding = string;
type Usage = { types: Set<string>; spreads: Set<string> };

/**
 * Selections in `document` that repeat at least half of a shared fragment's fields without
 * spreading it, and the types the document selects and the fragments it spreads.
 */
function inspect(document: DocumentNode, fragments: Fragment[], source: string) {
  const findings: Finding[] = [];
  const usage: Usage = { types: new Set(), spreads: new Set() };
  const typeInfo = new TypeInfo(schema);
  visit(
    document,
    visitWithTypeInfo(typeInfo, {
      FragmentSpread: (node) => void usage.spreads.add(node.name.value),
      SelectionSet: (node) => {
        const type = typeInfo.getParentType()?.name;
        if (!type) return;
        usage.types.add(type);
        const fields = new Set<string>();
        const spread = new Set<string>();
        for (const selection of node.selections) {
          if (selection.kind === Kind.FIELD) fields.add(selection.name.value);
          if (selection.kind === Kind.FRAGMENT_SPREAD) spread.add(selection.name.value);
        }
        for (const fragment of fragments) {
          if (spread.has(fragment.name) || !applies(fragment, type)) continue;
          const repeated = [...fragment.fields].filter((field) => fields.has(field));
          if (repeated.length > 0 && repeated.length >= fragment.fields.size / 2) {
            const line = node.loc ? node.loc.source.body.slice(0, node.loc.start).split('\n').length : 0;
            findings.push(`${source}:${line} ${type} { ${repeated.join(' ')} } repeats ...${fragment.name}`);
          }
        }
      },
    }),
  );
  return { findings, usage };
}

const fragments = fragmentsOf(shared);
const consumers = Object.entries(CONSUMERS).map(([consumer, files]) => {
  const findings: Finding[] = [];
  const usage: Usage = { types: new Set(), spreads: new Set() };
  for (const file of files) {
    const result = inspect(parse(readFileSync(join(ROOT, file), 'utf8')), fragments, file);
    findings.push(...result.findings);
    for (const type of result.usage.types) usage.types.add(type);
    for (const name of result.usage.spreads) usage.spreads.add(name);
  }
  // A spread of a shared fragment uses the shared fragments it spreads in turn.
  for (let grew = true; grew; ) {
    grew = false;
    for (const fragment of fragments) {
      if (!usage.spreads.has(fragment.name)) continue;
      for (const name of fragment.spreads) {
        if (!usage.spreads.has(name)) {
          usage.spreads.add(name);
          grew = true;
        }
      }
    }
  }
  return { consumer, files, findings, usage };
});

describe('shared GraphQL fragments', () => {
  test('every consumer has documents, and the fragments are many', () => {
    for (const { consumer, files } of consumers) expect(files.length, consumer).toBeGreaterThan(0);
    expect(fragments.length).toBeGreaterThanOrEqual(20);
  });

  test('no document spells out half of a shared fragment or more instead of spreading it', () => {
    expect(consumers.flatMap(({ findings }) => findings)).toEqual([]);
  });

  test('a consumer that selects a fragment’s type uses the fragment, and each has two users', () => {
    const missing: string[] = [];
    for (const fragment of fragments) {
      const users = consumers.filter(({ usage }) => usage.spreads.has(fragment.name));
      if (users.length < 2)
        missing.push(`${fragment.name}: used by ${users.map((u) => u.consumer).join(', ')}`);
      for (const { consumer, usage } of consumers) {
        const selects = [...usage.types].some((type) => applies(fragment, type));
        if (selects && !usage.spreads.has(fragment.name))
          missing.push(`${fragment.name}: not used by ${consumer}`);
      }
    }
    expect(missing).toEqual([]);
  });

  test('the check finds a spelled-out selection, and accepts the spread or a small one', () => {
    const check = (query: string) => inspect(parse(query), fragments, 'inline').findings;
    expect(check('query { session(id: "1") { id sessionId status } }')).toEqual([]);
    expect(check('query { session(id: "1") { ...SessionFields agent } }')).toEqual([]);
    expect(
      check(
        'mutation { createProject(input: { name: "p" }) { ... on CreateProjectSuccess { project { id } } ' +
          '... on ManifestInvalidError { code message } } }',
      ),
    ).toEqual(['inline:1 ManifestInvalidError { code message } repeats ...ErrorFields']);
    expect(check('query { viewer { tokens(first: 1) { pageInfo { endCursor } } } }')).toEqual([
      'inline:1 PageInfo { endCursor } repeats ...PageFields',
    ]);
  });
});
