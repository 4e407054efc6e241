// This installation's id: one database and the fleet of server processes on it. Cloud adapters tag
// every sandbox with it, and the reconciler only ever destroys sandboxes carrying it, so two
// installations sharing a provider account never touch each other's sandboxes. Generated once and
// kept in the database (every process of the fleet reads the same value);
// SINGULACOMP_INSTALLATION_ID overrides it — a copy of the database (staging restored from
// production) must set its own, or it would take production's sandboxes for orphans.
import { randomUUID } from 'node:crypto';
import type { Db } from '../platform';

const KEY = 'installation-id';

export interface Installation {
  id(): Promise<string>;
}

export function createInstallation(options: { db: Db; configured?: string | null }): Installation {
  let cached: Promise<string> | null = options.configured ? Promise.resolve(options.configured) : null;
  async function load(): Promise<string> {
    await options.db.platformSetting.createMany({
      data: [{ key: KEY, value: randomUUID() }],
      skipDuplicates: true,
    });
    const row = await options.db.platformSetting.findUniqueOrThrow({ where: { key: KEY } });
    return row.value;
  }
  return {
    id() {
      if (!cached) {
        cached = load();
        // A failed read (database down) is retried on the next call.
        cached.catch(() => {
          cached = null;
        });
      }
      return cached;
    },
  };
}
