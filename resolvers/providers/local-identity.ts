// LOCAL sandbox process identities in PostgreSQL: every server process on this host sees them, so
// any of them can stop any LOCAL sandbox, and the reconciler can find the ones nobody owns.
import { readFileSync } from 'node:fs';
import { hostname } from 'node:os';
import type { Db } from '../platform';
import type { LocalIdentityStore } from './local';

/** hostname + boot id: a pid recorded on another host or before a reboot names nothing here. */
export function hostIdentity(): string {
  let bootId = 'unknown-boot';
  try {
    bootId = readFileSync('/proc/sys/kernel/random/boot_id', 'utf8').trim();
  } catch {
    // Not Linux: the hostname alone (pid reuse is still guarded by the start time).
  }
  return `${hostname()}/${bootId}`;
}

export function createLocalIdentityStore(db: Db, host = hostIdentity()): LocalIdentityStore {
  return {
    async save(providerSandboxId, identity) {
      const data = {
        host,
        pid: identity.pid,
        startTicks: identity.startTicks,
        sessionId: identity.sessionId,
      };
      await db.localSandboxProcess.upsert({
        where: { providerSandboxId },
        create: { providerSandboxId, ...data },
        update: data,
      });
    },
    async load(providerSandboxId) {
      const row = await db.localSandboxProcess.findUnique({ where: { providerSandboxId } });
      if (!row || row.host !== host) return null;
      return { pid: row.pid, startTicks: row.startTicks, sessionId: row.sessionId };
    },
  };
}
