// Writes schema.graphql from the Pothos schema. Run `npm run schema` after changing schema/;
// test/core/schema-drift.test.ts fails while the committed file is stale.
import { writeFileSync } from 'node:fs';
import { lexicographicSortSchema, printSchema } from 'graphql';
import { schema } from '../schema/index';

export function renderSchema(): string {
  return `${printSchema(lexicographicSortSchema(schema))}\n`;
}

if (process.argv[1] && import.meta.url.endsWith(process.argv[1].split('/').pop() ?? '')) {
  writeFileSync(new URL('../schema.graphql', import.meta.url), renderSchema());
}
