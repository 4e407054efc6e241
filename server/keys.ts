// Key material: one 32-byte root key (SINGULACOMP_SECRET_KEY, or generated once into the data dir
// for single-host installs), from which purpose-bound keys are derived.
import { hkdfSync, randomBytes } from 'node:crypto';
import { chmodSync, existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import type { Keys } from '../resolvers/auth/keys';

export type { Keys };

function derive(root: Buffer, purpose: string): Buffer {
  return Buffer.from(hkdfSync('sha256', root, Buffer.alloc(0), `singulacomp:${purpose}`, 32));
}

export function loadKeys(options: { secretKey: string | null; dataDir: string }): Keys {
  let root: Buffer;
  if (options.secretKey) {
    root = Buffer.from(options.secretKey, 'base64');
    if (root.length < 32) {
      throw new Error(
        'SINGULACOMP_SECRET_KEY must be at least 32 bytes, base64-encoded (openssl rand -base64 32).',
      );
    }
  } else {
    const file = join(options.dataDir, 'secret.key');
    if (existsSync(file)) {
      root = Buffer.from(readFileSync(file, 'utf8').trim(), 'base64');
    } else {
      mkdirSync(options.dataDir, { recursive: true });
      root = randomBytes(32);
      writeFileSync(file, `${root.toString('base64')}\n`, { mode: 0o600, flag: 'wx' });
      chmodSync(file, 0o600);
    }
  }
  return { encryption: derive(root, 'encryption'), sandboxJwt: new Uint8Array(derive(root, 'sandbox-jwt')) };
}
