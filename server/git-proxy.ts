// Git smart-HTTP transport on the API: `/v1/git/<projectId>.git/{info/refs,git-upload-pack,
// git-receive-pack}`, served by real `git upload-pack` / `git receive-pack --stateless-rpc` over the
// server's per-project mirror. Who may do what is decided by resolvers/git/access.ts.
//
// A push is answered only after the upstream decided: the pack is received into the mirror (under
// its write lock), the accepted updates are pushed upstream with the server-held credential, and
// only then does the client get receive-pack's report. An upstream refusal rolls the mirror back and
// reports the upstream's reason instead; a refused ref never reaches git at all.
import { createGunzip } from 'node:zlib';
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import {
  GitAccessError,
  type GitAccess,
  type GitGrant,
  type GitServiceName,
  type PushCommand,
  ZERO_SHA,
} from '../resolvers/git/access';
import { spawnGitService } from '../resolvers/git/exec';
import type { GitService } from '../resolvers/git/git';
import { readBody } from './body-limit';
import type { Logger } from './logger';

const ROUTE = /^\/v1\/git\/([^/]+)\.git\/(info\/refs|git-upload-pack|git-receive-pack)$/;
const SERVICES = new Set<GitServiceName>(['git-upload-pack', 'git-receive-pack']);

// Mirrors keep refs of their own (fetched commits, the upstream HEAD): never shown to clients.
const SERVICE_CONFIG: Readonly<Record<string, string>> = {
  'uploadpack.hideRefs': 'refs/mirror',
  'receive.hideRefs': 'refs/mirror',
  'receive.denyDeletes': 'true',
  'receive.denyNonFastForwards': 'true',
  'core.hooksPath': '/dev/null',
  'uploadpack.allowFilter': 'true',
};

export interface GitProxyOptions {
  access: GitAccess;
  git: GitService;
  logger: Logger;
  /**
   * Largest push body accepted (the pack is held in memory until the rules have been checked).
   * @default 512 MiB
   */
  maxPushBytes?: number;
}

export interface GitProxy {
  /** True for paths this proxy serves. */
  matches(path: string): boolean;
  handle(req: IncomingMessage, res: ServerResponse): Promise<void>;
}

/** One pkt-line. */
export function pkt(data: string | Buffer): Buffer {
  const body = typeof data === 'string' ? Buffer.from(data, 'utf8') : data;
  return Buffer.concat([Buffer.from((body.length + 4).toString(16).padStart(4, '0')), body]);
}
const FLUSH = Buffer.from('0000');

/** The command list at the head of a receive-pack request and the capabilities the client asked for. */
export function parsePushCommands(body: Buffer): { commands: PushCommand[]; capabilities: Set<string> } {
  const commands: PushCommand[] = [];
  let capabilities = new Set<string>();
  let offset = 0;
  while (offset + 4 <= body.length) {
    const length = Number.parseInt(body.subarray(offset, offset + 4).toString('ascii'), 16);
    if (!Number.isFinite(length)) throw new GitAccessError(400, 'Malformed push request.');
    if (length === 0) break;
    if (length < 4 || offset + length > body.length) throw new GitAccessError(400, 'Malformed push request.');
    let line = body.subarray(offset + 4, offset + length).toString('utf8');
    offset += length;
    if (line.startsWith('shallow ')) continue;
    const nul = line.indexOf('\0');
    if (nul >= 0) {
      capabilities = new Set(
        line
          .slice(nul + 1)
          .trim()
          .split(' '),
      );
      line = line.slice(0, nul);
    }
    const [oldSha, newSha, ref] = line.trim().split(' ');
    if (!oldSha || !newSha || !ref) throw new GitAccessError(400, 'Malformed push command.');
    commands.push({ oldSha, newSha, ref });
  }
  return { commands, capabilities };
}

/** A receive-pack answer made by the proxy itself: a status per ref and a message shown as `remote:`. */
export function pushReport(
  capabilities: ReadonlySet<string>,
  results: ReadonlyArray<{ ref: string; reason: string | null }>,
  messages: readonly string[],
): Buffer {
  const report = Buffer.concat([
    pkt('unpack ok\n'),
    ...results.map((r) => pkt(r.reason ? `ng ${r.ref} ${r.reason.replace(/\s+/g, ' ')}\n` : `ok ${r.ref}\n`)),
    FLUSH,
  ]);
  if (!capabilities.has('side-band-64k') && !capabilities.has('side-band')) return report;
  const chunk = capabilities.has('side-band-64k') ? 65_515 : 995;
  const parts: Buffer[] = messages.map((message) =>
    pkt(Buffer.concat([Buffer.from([2]), Buffer.from(`${message}\n`, 'utf8')])),
  );
  for (let at = 0; at < report.length; at += chunk) {
    parts.push(pkt(Buffer.concat([Buffer.from([1]), report.subarray(at, at + chunk)])));
  }
  parts.push(FLUSH);
  return Buffer.concat(parts);
}

async function readPush(req: IncomingMessage, limit: number): Promise<Buffer> {
  const source: NodeJS.ReadableStream =
    req.headers['content-encoding'] === 'gzip' ? req.pipe(createGunzip()) : req;
  const body = await readBody(source as AsyncIterable<Buffer>, limit);
  if (!body) throw new GitAccessError(400, `Push larger than ${limit} bytes.`);
  return body;
}

/** Runs a stateless-rpc git service on the mirror with `input`, collecting its output. */
function runService(
  mirrorDir: string,
  service: GitServiceName,
  extra: string[],
  input: Buffer | null,
): Promise<{ code: number | null; stdout: Buffer; stderr: string }> {
  return new Promise((resolve, reject) => {
    const child = spawnGitService([service.slice(4), '--stateless-rpc', ...extra, mirrorDir], {
      cwd: mirrorDir,
      config: SERVICE_CONFIG,
    });
    const out: Buffer[] = [];
    let stderr = '';
    child.stdout?.on('data', (chunk: Buffer) => out.push(chunk));
    child.stderr?.on('data', (chunk: Buffer) => {
      if (stderr.length < 8_000) stderr += chunk.toString('utf8');
    });
    child.stdin?.on('error', () => {});
    child.stdin?.end(input ?? undefined);
    child.once('error', reject);
    child.once('close', (code) => resolve({ code, stdout: Buffer.concat(out), stderr }));
  });
}

export function createGitProxy(options: GitProxyOptions): GitProxy {
  const { access, git } = options;
  const log = options.logger.child({ module: 'git-proxy' });
  const maxPushBytes = options.maxPushBytes ?? 512 * 1024 * 1024;

  function fail(res: ServerResponse, status: number, message: string): void {
    if (res.headersSent) {
      res.destroy();
      return;
    }
    const headers: Record<string, string> = { 'content-type': 'text/plain; charset=utf-8' };
    if (status === 401) headers['www-authenticate'] = 'Basic realm="SingulaComp git"';
    res.writeHead(status, headers).end(`${message}\n`);
  }

  async function advertise(res: ServerResponse, grant: GitGrant, service: GitServiceName) {
    const mirrorDir = await git.syncMirror(grant.repo);
    const result = await runService(mirrorDir, service, ['--advertise-refs'], null);
    if (result.code !== 0) throw new Error(`${service} --advertise-refs failed: ${result.stderr.trim()}`);
    res.writeHead(200, {
      'content-type': `application/x-${service}-advertisement`,
      'cache-control': 'no-cache',
    });
    res.end(Buffer.concat([pkt(`# service=${service}\n`), FLUSH, result.stdout]));
  }

  async function uploadPack(req: IncomingMessage, res: ServerResponse, grant: GitGrant) {
    const mirrorDir = await git.mirrorDir(grant.repo);
    const child = spawnGitService(['upload-pack', '--stateless-rpc', mirrorDir], {
      cwd: mirrorDir,
      config: SERVICE_CONFIG,
    });
    const input: NodeJS.ReadableStream =
      req.headers['content-encoding'] === 'gzip' ? req.pipe(createGunzip()) : req;
    res.writeHead(200, {
      'content-type': 'application/x-git-upload-pack-result',
      'cache-control': 'no-cache',
    });
    let stderr = '';
    child.stderr?.on('data', (chunk: Buffer) => {
      if (stderr.length < 8_000) stderr += chunk.toString('utf8');
    });
    // A client that goes away ends git too.
    res.once('close', () => {
      if (child.exitCode === null && child.pid) {
        try {
          process.kill(-child.pid, 'SIGKILL');
        } catch {
          // already gone
        }
      }
    });
    await Promise.all([
      pipeline(input as Readable, child.stdin!).catch(() => {}),
      pipeline(child.stdout!, res).catch(() => {}),
    ]);
    if (child.exitCode !== null && child.exitCode !== 0) {
      log.warn({ projectId: grant.project.id, stderr: stderr.trim() }, 'upload-pack failed');
    }
  }

  async function receivePack(req: IncomingMessage, res: ServerResponse, grant: GitGrant) {
    const body = await readPush(req, maxPushBytes);
    const { commands, capabilities } = parsePushCommands(body);
    const answer = (payload: Buffer) =>
      res
        .writeHead(200, {
          'content-type': 'application/x-git-receive-pack-result',
          'cache-control': 'no-cache',
        })
        .end(payload);

    const refusals = commands.map((command) => ({
      ref: command.ref,
      reason: access.refusal(grant, command),
    }));
    if (refusals.some((r) => r.reason !== null)) {
      // All or nothing: one refused ref refuses the whole push, so nothing lands half-way.
      const results = refusals.map((r) => ({
        ref: r.ref,
        reason: r.reason ?? 'not pushed: another ref in this push was refused',
      }));
      log.info({ projectId: grant.project.id, refusals: results }, 'push refused');
      answer(
        pushReport(
          capabilities,
          results,
          results.map((r) => `SingulaComp refused ${r.ref}: ${r.reason}`),
        ),
      );
      return;
    }

    await git.withMirrorLock(grant.repo, async (mirrorDir) => {
      const received = await runService(mirrorDir, 'git-receive-pack', [], body);
      // What receive-pack actually applied to the mirror (it may refuse a non-fast-forward itself).
      const applied: PushCommand[] = [];
      for (const command of commands) {
        const now = await git.inMirror(grant.repo, ['rev-parse', '--verify', '--quiet', command.ref]);
        if (now.exitCode === 0 && now.stdout.toString('utf8').trim() === command.newSha)
          applied.push(command);
      }
      if (applied.length === 0) {
        answer(received.stdout);
        return;
      }
      let upstreamRefusals: Array<{ ref: string; reason: string }> = [];
      try {
        const results = await access.forward(grant, applied);
        upstreamRefusals = results
          .filter((r) => !r.ok)
          .map((r) => ({ ref: r.ref, reason: `the upstream refused it: ${r.reason ?? 'rejected'}` }));
      } catch (error) {
        upstreamRefusals = applied.map((c) => ({
          ref: c.ref,
          reason: `the upstream could not be reached: ${(error as Error).message}`,
        }));
      }
      if (upstreamRefusals.length === 0) {
        answer(received.stdout);
        return;
      }
      // The upstream is the truth: undo the mirror's update of every ref it did not take.
      for (const refused of upstreamRefusals) {
        const command = applied.find((c) => c.ref === refused.ref);
        if (!command) continue;
        const undo =
          command.oldSha === ZERO_SHA
            ? ['update-ref', '-d', command.ref, command.newSha]
            : ['update-ref', command.ref, command.oldSha, command.newSha];
        await git.inMirror(grant.repo, undo);
      }
      log.warn({ projectId: grant.project.id, upstreamRefusals }, 'upstream refused a push');
      const results = commands.map((c) => ({
        ref: c.ref,
        reason: upstreamRefusals.find((r) => r.ref === c.ref)?.reason ?? null,
      }));
      answer(
        pushReport(
          capabilities,
          results,
          upstreamRefusals.map((r) => `SingulaComp could not land ${r.ref}: ${r.reason}`),
        ),
      );
    });
  }

  return {
    matches: (path) => path.startsWith('/v1/git/'),

    async handle(req, res) {
      const url = new URL(req.url ?? '/', 'http://proxy');
      const match = ROUTE.exec(url.pathname);
      if (!match) return fail(res, 404, 'Not a git proxy route: use /v1/git/<projectId>.git.');
      const projectId = decodeURIComponent(match[1] ?? '');
      const endpoint = match[2] ?? '';
      const service = (
        endpoint === 'info/refs' ? url.searchParams.get('service') : endpoint
      ) as GitServiceName;
      if (!SERVICES.has(service))
        return fail(res, 400, 'Only smart HTTP (git-upload-pack, git-receive-pack) is served.');
      const expectedMethod = endpoint === 'info/refs' ? 'GET' : 'POST';
      if (req.method !== expectedMethod) return fail(res, 405, `Use ${expectedMethod} for ${endpoint}.`);
      try {
        const grant = await access.authorize(req.headers.authorization, projectId, service);
        if (endpoint === 'info/refs') await advertise(res, grant, service);
        else if (service === 'git-upload-pack') await uploadPack(req, res, grant);
        else await receivePack(req, res, grant);
      } catch (error) {
        if (error instanceof GitAccessError) return fail(res, error.status, error.message);
        log.error({ err: error, projectId, service }, 'git proxy request failed');
        fail(res, 502, `The project's repository could not be served: ${(error as Error).message}`);
      }
    },
  };
}
