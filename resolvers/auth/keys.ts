// Purpose-bound keys derived from the root key (loaded by server/keys.ts).
export interface Keys {
  /** AES-256-GCM key for secrets and credentials at rest. */
  encryption: Buffer;
  /** HS256 key for sandbox tokens. */
  sandboxJwt: Uint8Array;
}
