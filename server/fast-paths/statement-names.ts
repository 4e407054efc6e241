// Named statements: PrismaPg sends every statement unnamed, so PostgreSQL parses and plans it on
// every call. server/db.ts hands these names to PrismaPg (statementNameGenerator) and to the
// generated list reads of find-many-sql.ts, unless SINGULACOMP_FAST_PATHS turns them off.
import { createHash } from 'node:crypto';

/** Distinct texts of one kind (see statementNames) that get a name; later ones run unnamed. */
const MAX_PREPARED_STATEMENTS = 500;

/**
 * Names generated statements (Prisma's, through PrismaPg's statementNameGenerator, and the compiled
 * list reads of find-many-sql.ts), so PostgreSQL parses and plans each text once per connection
 * instead of on every call, and the text is not sent again. A name is `prefix` and a hash of its
 * text. Lists of varying length make new texts, so only the first `max` distinct texts get one:
 * that bounds what each connection keeps prepared.
 */
export function statementNames(
  prefix: string,
  max = MAX_PREPARED_STATEMENTS,
): (query: { sql: string }) => string | undefined {
  const names = new Map<string, string>();
  return ({ sql }) => {
    let name = names.get(sql);
    if (name === undefined && names.size < max) {
      name = `${prefix}-${createHash('sha256').update(sql).digest('base64url').slice(0, 24)}`;
      names.set(sql, name);
    }
    return name;
  };
}
