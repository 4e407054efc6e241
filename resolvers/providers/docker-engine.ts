// The DOCKER adapter's Engine plumbing: the dockerode client for DOCKER_HOST (unix socket, tcp,
// TLS), the error table's input from dockerode failures, container states, and the tar contexts
// image builds are sent as (git archive of the session's commit plus the composed Dockerfile).
import { execFile } from 'node:child_process';
import { createHash } from 'node:crypto';
import { createReadStream, readFileSync } from 'node:fs';
import { readdir, readFile, stat } from 'node:fs/promises';
import { join } from 'node:path';
import type { Readable } from 'node:stream';
import Docker from 'dockerode';
import * as tar from 'tar-stream';
import { ProviderBuildError, ProviderHttpError } from './errors';
import type { SandboxState } from './types';

/** Where the Engine is (DockerProviderOptions' connection part). */
export interface EngineConnection {
  host?: string;
  tls?: { certPath: string } | null;
  docker?: Docker;
}

export function dockerClient(options: EngineConnection): Docker {
  if (options.docker) return options.docker;
  const host = options.host ?? 'unix:///var/run/docker.sock';
  if (host.startsWith('unix://')) return new Docker({ socketPath: host.slice('unix://'.length) });
  const url = new URL(host.replace(/^tcp:/, options.tls ? 'https:' : 'http:'));
  const tls = options.tls;
  return new Docker({
    host: url.hostname,
    port: Number(url.port || (tls ? 2376 : 2375)),
    protocol: tls ? 'https' : 'http',
    ...(tls
      ? {
          ca: readFileSyncSafe(join(tls.certPath, 'ca.pem')),
          cert: readFileSyncSafe(join(tls.certPath, 'cert.pem')),
          key: readFileSyncSafe(join(tls.certPath, 'key.pem')),
        }
      : {}),
  });
}

function readFileSyncSafe(path: string): string | undefined {
  // dockerode wants the bytes at construction; a missing file surfaces as a TLS error on use.
  try {
    return readFileSync(path, 'utf8');
  } catch {
    return undefined;
  }
}

const TLS_REFUSAL =
  /^(ERR_SSL_.*ALERT_(UNKNOWN_CA|BAD_CERTIFICATE|CERTIFICATE_REQUIRED|CERTIFICATE_UNKNOWN|ACCESS_DENIED|HANDSHAKE_FAILURE|DECRYPT_ERROR)|UNABLE_TO_VERIFY_LEAF_SIGNATURE|UNABLE_TO_GET_ISSUER_CERT(_LOCALLY)?|DEPTH_ZERO_SELF_SIGNED_CERT|SELF_SIGNED_CERT_IN_CHAIN|CERT_[A-Z_]+|ERR_TLS_CERT_ALTNAME_INVALID)$/;

/** dockerode/docker-modem failures as the error table's input (status and message). */
export function asHttpError(error: unknown): unknown {
  if (error instanceof ProviderHttpError || error instanceof ProviderBuildError) return error;
  const e = error as {
    statusCode?: number;
    json?: { message?: string } | null;
    code?: string;
    message?: string;
  };
  if (typeof e?.statusCode === 'number') {
    const detail = e.json?.message ?? e.message ?? `HTTP ${e.statusCode}`;
    return new ProviderHttpError(e.statusCode, detail);
  }
  // A tcp host's TLS: the engine refused our client certificate, or ours does not trust its own.
  if (e?.code && TLS_REFUSAL.test(e.code)) {
    return new ProviderHttpError(401, `Docker Engine refused the TLS handshake: ${e.message ?? e.code}`);
  }
  if (e?.code && /^(ECONNREFUSED|ENOENT|ECONNRESET|EPIPE|ETIMEDOUT|EHOSTUNREACH)$/.test(e.code)) {
    return new ProviderHttpError(503, `Docker Engine unreachable: ${e.message ?? e.code}`);
  }
  return error;
}

export function stateOf(status: string | undefined): SandboxState {
  switch (status) {
    case 'running':
      return 'STARTED';
    case 'created':
    case 'configured':
      return 'CREATING';
    case 'restarting':
      return 'STARTING';
    case 'removing':
      return 'STOPPING';
    case 'exited':
    case 'stopped':
    case 'paused':
      return 'STOPPED';
    case 'dead':
      return 'ERROR';
    default:
      return 'ERROR';
  }
}

export function run(file: string, args: string[], cwd?: string): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    execFile(file, args, { cwd, encoding: 'buffer', maxBuffer: 4 * 1024 ** 3 }, (error, stdout, stderr) => {
      if (error) reject(new Error(`${file} ${args.join(' ')}: ${stderr.toString('utf8') || error.message}`));
      else resolve(stdout);
    });
  });
}

/** A file of the runtime image's context: its path there, its mode and where its bytes are. */
export interface ContextFile {
  path: string;
  mode: number;
  source: string;
}

export async function walk(dir: string, prefix: string): Promise<ContextFile[]> {
  const out: ContextFile[] = [];
  for (const entry of (await readdir(dir, { withFileTypes: true })).sort((a, b) =>
    a.name < b.name ? -1 : 1,
  )) {
    const full = join(dir, entry.name);
    if (entry.isDirectory()) out.push(...(await walk(full, `${prefix}${entry.name}/`)));
    else if (entry.isFile())
      out.push({ path: `${prefix}${entry.name}`, mode: (await stat(full)).mode & 0o777, source: full });
  }
  return out;
}

export async function sha256File(path: string): Promise<string> {
  const hash = createHash('sha256');
  for await (const chunk of createReadStream(path)) hash.update(chunk as Buffer);
  return hash.digest('hex');
}

/** Packs files (bytes in memory or on disk) into a tar stream. */
export function packTar(
  entries: Array<{ path: string; mode: number; data?: Buffer; source?: string }>,
): Readable {
  const pack = tar.pack();
  void (async () => {
    try {
      for (const entry of entries) {
        const data = entry.data ?? (await readFile(entry.source as string));
        await new Promise<void>((resolve, reject) =>
          pack.entry({ name: entry.path, mode: entry.mode, mtime: new Date(0) }, data, (error) =>
            error ? reject(error) : resolve(),
          ),
        );
      }
      pack.finalize();
    } catch (error) {
      pack.destroy(error as Error);
    }
  })();
  return pack as unknown as Readable;
}

/** `git archive` of `commit` re-packed with `extra` files appended (the composed Dockerfile). */
export async function contextTar(
  context: { gitDir: string; commit: string } | undefined,
  extra: Array<{ path: string; data: Buffer }>,
): Promise<Readable> {
  const pack = tar.pack();
  const appendExtra = () => {
    for (const file of extra) pack.entry({ name: file.path, mode: 0o644, mtime: new Date(0) }, file.data);
    pack.finalize();
  };
  if (!context) {
    appendExtra();
    return pack as unknown as Readable;
  }
  const archive = await run('git', ['--git-dir', context.gitDir, 'archive', '--format=tar', context.commit]);
  const extract = tar.extract();
  extract.on('entry', (header, stream, next) => {
    if ((header.type as string) === 'pax-global-header') {
      stream.resume();
      stream.on('end', next);
      return;
    }
    stream.pipe(pack.entry(header, next));
  });
  extract.on('finish', appendExtra);
  extract.on('error', (error) => pack.destroy(error));
  extract.end(archive);
  return pack as unknown as Readable;
}

export interface BuildEvent {
  stream?: string;
  status?: string;
  error?: string;
  errorDetail?: { message?: string };
  aux?: { ID?: string };
}
