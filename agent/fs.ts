// The daemon's file-system calls as promises over node:fs's callback API. Importing
// `node:fs/promises` also loads readline, the REPL history and the file watchers (for
// `FileHandle.readLines` and `watch`), about 3 MiB of the idle daemon's resident memory.
import * as fs from 'node:fs';
import { promisify } from 'node:util';

export const mkdir = promisify(fs.mkdir);
export const readdir = promisify(fs.readdir);
export const readFile = promisify(fs.readFile);
export const readlink = promisify(fs.readlink);
export const stat = promisify(fs.stat);
export const statfs = promisify(fs.statfs);
export const writeFile = promisify(fs.writeFile);

const open = promisify(fs.open);
const read = promisify(fs.read);
const close = promisify(fs.close);

/** Bytes read per call: below half of Buffer's 8 KiB pool, so each chunk is a slice of that pool. */
const CHUNK = 4_000;

/**
 * A small text file read in pooled 4 KB chunks. For a file that reports size 0 (everything under
 * /proc and cgroupfs), `readFile` allocates a fresh 64 KiB buffer on every call; the telemetry
 * reads several of those per sample, and the freed buffers kept about 1.5 MiB of the idle daemon's
 * memory resident.
 */
export async function readSmallText(path: string): Promise<string> {
  const fd = await open(path, 'r');
  try {
    const chunks: Buffer[] = [];
    for (;;) {
      const chunk = Buffer.allocUnsafe(CHUNK);
      const { bytesRead } = await read(fd, chunk, 0, CHUNK, null);
      if (bytesRead === 0) break;
      chunks.push(chunk.subarray(0, bytesRead));
    }
    return chunks.length === 1 ? chunks[0]!.toString('utf8') : Buffer.concat(chunks).toString('utf8');
  } finally {
    await close(fd);
  }
}
