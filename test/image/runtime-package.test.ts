// The runtime package (scripts/build-runtime.ts): built twice it is the same bytes; unpacked with
// tar it runs on plain `node` with no node_modules in reach; the runtime image's Dockerfile puts
// its files where the runtime layer copies them from, and the package layer (as E2B's SDK turns it
// into template steps) downloads, verifies and installs this very tarball from a local server.
import { execFile, spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import {
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  statSync,
  writeFileSync,
} from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { dirname, join, relative } from 'node:path';
import { DockerfileParser } from 'dockerfile-ast';
import { Template } from 'e2b';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { composeSandboxDockerfile } from '../../image/dockerfile';
import {
  AGENT_BINARY,
  CLI_BINARY,
  ENTRYPOINT_BINARY,
  RUNTIME_BIN_DIR,
  RUNTIME_DIR,
  RUNTIME_PREFIX,
  runtimeChecksumName,
  runtimeTarballName,
} from '../../image/runtime-layout';
import { buildRuntimePackage, type RuntimePackage } from '../../scripts/build-runtime';
import { CreateProjectDocument } from '../generated/graphql';
import { type TestApp, startTestApp } from '../support/app';
import { createTestRepo } from '../support/git';
import { testRunEnv } from '../support/test-run';

const VERSION = '0.9.1-test';
const EXPECTED_ENTRIES = [
  'drwxr-xr-x root/root 0 bin/',
  '-rwxr-xr-x root/root bin/singulacomp',
  '-rwxr-xr-x root/root bin/singulacomp-agent',
  '-rwxr-xr-x root/root bin/singulacomp-entrypoint',
  'drwxr-xr-x root/root 0 runtime/',
  '-rw-r--r-- root/root runtime/manifest.json',
  '-rw-r--r-- root/root runtime/singulacomp-agent.mjs',
  '-rw-r--r-- root/root runtime/singulacomp.mjs',
];

interface Run {
  code: number | null;
  stdout: string;
  stderr: string;
}

/** The node this test runs on, and nothing else of ours, on PATH. */
const BARE_PATH = `${dirname(process.execPath)}:/usr/bin:/bin`;

/** Runs a file with exactly `env` (a bare PATH, an empty NODE_PATH), from `cwd`. */
function run(file: string, args: string[], cwd: string, env: Record<string, string> = {}): Promise<Run> {
  return new Promise((resolve) => {
    const child = execFile(
      file,
      args,
      {
        cwd,
        env: { PATH: BARE_PATH, NODE_PATH: '', HOME: cwd, TMPDIR: tmpdir(), ...testRunEnv(), ...env },
        timeout: 120_000,
      },
      (error, stdout, stderr) => {
        const code = error ? (typeof error.code === 'number' ? error.code : null) : 0;
        resolve({ code, stdout, stderr });
      },
    );
    child.stdin?.end();
  });
}

function sha256(data: Buffer): string {
  return createHash('sha256').update(data).digest('hex');
}

/** `tar -tvzf` without sizes of files and dates, for a stable comparison. */
function listing(tarball: string): string[] {
  const out = spawnSync('tar', ['-tvzf', tarball], { encoding: 'utf8' });
  expect(out.status, out.stderr).toBe(0);
  return out.stdout
    .trim()
    .split('\n')
    .map((line) => {
      const [mode, owner, size, date, time, name] = line.trim().split(/\s+/);
      expect(`${date} ${time}`).toBe('1970-01-01 00:00');
      return mode?.startsWith('d') ? `${mode} ${owner} ${size} ${name}` : `${mode} ${owner} ${name}`;
    });
}

function unpack(tarball: string): string {
  const root = mkdtempSync(join(tmpdir(), 'sc-runtime-unpacked-'));
  const out = spawnSync('tar', ['-xzf', tarball, '-C', root], { encoding: 'utf8' });
  expect(out.status, out.stderr).toBe(0);
  return root;
}

/** Every file below `dir`, relative, with its mode. */
function tree(dir: string): Record<string, string> {
  const files: Record<string, string> = {};
  const walk = (current: string): void => {
    for (const entry of readdirSync(current, { withFileTypes: true })) {
      const path = join(current, entry.name);
      if (entry.isDirectory()) walk(path);
      else files[relative(dir, path)] = (statSync(path).mode & 0o777).toString(8);
    }
  };
  walk(dir);
  return files;
}

describe('the runtime package', () => {
  const outA = mkdtempSync(join(tmpdir(), 'sc-runtime-a-'));
  const outB = mkdtempSync(join(tmpdir(), 'sc-runtime-b-'));
  let built: RuntimePackage;
  let unpacked: string;

  beforeAll(async () => {
    built = await buildRuntimePackage({ outDir: outA, version: VERSION });
    unpacked = unpack(built.tarball);
  });

  afterAll(() => {
    for (const dir of [outA, outB, unpacked]) if (dir) rmSync(dir, { recursive: true, force: true });
  });

  test('the tarball is deterministic, its .sha256 names it, and it holds exactly the tree the runtime layer installs', async () => {
    expect(built.tarball).toBe(join(outA, runtimeTarballName(VERSION)));
    expect(built.checksumFile).toBe(join(outA, runtimeChecksumName(VERSION)));
    const bytes = readFileSync(built.tarball);
    expect(sha256(bytes)).toBe(built.sha256);
    expect(readFileSync(built.checksumFile, 'utf8')).toBe(
      `${built.sha256}  ${runtimeTarballName(VERSION)}\n`,
    );
    // sha256sum itself agrees with the published checksum file.
    const check = spawnSync('sha256sum', ['-c', runtimeChecksumName(VERSION)], {
      cwd: outA,
      encoding: 'utf8',
    });
    expect(check.status, check.stderr).toBe(0);

    const again = await buildRuntimePackage({ outDir: outB, version: VERSION });
    expect(again.sha256).toBe(built.sha256);
    expect(readFileSync(again.tarball).equals(bytes)).toBe(true);

    expect(listing(built.tarball)).toEqual(EXPECTED_ENTRIES);
    const manifest = JSON.parse(readFileSync(join(unpacked, 'runtime/manifest.json'), 'utf8')) as {
      version: string;
      files: Record<string, string>;
    };
    expect(manifest.version).toBe(VERSION);
    expect(Object.keys(manifest.files).sort()).toEqual([
      'bin/singulacomp',
      'bin/singulacomp-agent',
      'bin/singulacomp-entrypoint',
      'runtime/singulacomp-agent.mjs',
      'runtime/singulacomp.mjs',
    ]);
    for (const [path, digest] of Object.entries(manifest.files)) {
      expect(sha256(readFileSync(join(unpacked, path))), path).toBe(digest);
    }
    // The entrypoint is the repository's own script, byte for byte.
    expect(readFileSync(join(unpacked, 'bin/singulacomp-entrypoint'), 'utf8')).toBe(
      readFileSync(new URL('../../cli/entrypoint.sh', import.meta.url), 'utf8'),
    );
  });

  test('unpacked outside the repository, the commands run on plain node with nothing to resolve modules from', async () => {
    // No node_modules anywhere above the unpacked tree, so a bare import could not be satisfied.
    for (let dir = unpacked; dir !== dirname(dir); dir = dirname(dir)) {
      expect(existsSync(join(dir, 'node_modules')), dir).toBe(false);
    }
    const bundles = ['runtime/singulacomp.mjs', 'runtime/singulacomp-agent.mjs'];
    for (const bundle of bundles) {
      const text = readFileSync(join(unpacked, bundle), 'utf8');
      // ASCII only, so V8 holds the source one byte per character (scripts/esbuild-settings.mjs).
      expect(text.match(/[\u0080-\uffff]/g) ?? [], bundle).toEqual([]);
      const specifiers = [...text.matchAll(/^import\s[^;]*?from\s*["']([^"']+)["']/gm)].map((m) => m[1]);
      expect(specifiers.length, bundle).toBeGreaterThan(0);
      expect(
        specifiers.filter((s) => !s?.startsWith('node:')),
        bundle,
      ).toEqual([]);
    }

    const help = await run(join(unpacked, 'bin/singulacomp'), ['--help'], unpacked);
    expect(help.code, help.stderr).toBe(0);
    expect(help.stdout).toContain('Usage: singulacomp');
    for (const command of ['login', 'git-credential', 'projects', 'sessions', 'change-requests', 'tokens']) {
      expect(help.stdout).toContain(command);
    }

    // The daemon has no --help: an unknown flag and a missing environment are reported at once (exit 2).
    const agent = await run(join(unpacked, 'bin/singulacomp-agent'), ['--no-such-flag'], unpacked);
    expect(agent.code).toBe(2);
    expect(agent.stderr).toContain('invalid daemon configuration');
    expect(agent.stderr).toContain("flags: Unknown option '--no-such-flag'");
    expect(agent.stderr).toContain('SINGULACOMP_SESSION_ID');

    // The entrypoint starts the daemon and exits with its status.
    const entry = await run(
      join(unpacked, 'bin/singulacomp-entrypoint'),
      [join(unpacked, 'bin/singulacomp-agent'), '--no-such-flag'],
      unpacked,
    );
    expect(entry.code).toBe(2);
    expect(entry.stderr).toContain("flags: Unknown option '--no-such-flag'");
  });

  test('the unpacked CLI talks to a real server (GraphQL over HTTP from the bundle)', async () => {
    let t: TestApp | undefined;
    const repo = createTestRepo({ 'README.md': '# runtime\n' });
    try {
      t = await startTestApp();
      const created = await t.request(CreateProjectDocument, {
        input: { name: 'runtime-package', repositoryUrl: repo.url },
      });
      if (created.data?.createProject.__typename !== 'CreateProjectSuccess')
        throw new Error(JSON.stringify(created));
      const listed = await run(join(unpacked, 'bin/singulacomp'), ['--json', 'projects', 'list'], unpacked, {
        SINGULACOMP_API_URL: t.url,
        SINGULACOMP_TOKEN: t.adminToken,
      });
      expect(listed.code, listed.stderr).toBe(0);
      const projects = JSON.parse(listed.stdout) as Array<{ projectId: string; name: string }>;
      expect(projects).toEqual([
        expect.objectContaining({
          projectId: created.data.createProject.project.projectId,
          name: 'runtime-package',
        }),
      ]);
    } finally {
      await t?.stop();
      repo.remove();
    }
  }, 240_000);

  test('the runtime image carries every path the image-form layer copies from it', () => {
    const dockerfile = readFileSync(join(built.imageContext, 'Dockerfile'), 'utf8');
    const instructions = DockerfileParser.parse(dockerfile).getInstructions();
    expect(instructions.map((i) => i.getKeyword())).toEqual(['FROM', 'COPY', 'COPY']);
    expect(instructions[0]?.getArguments().map((a) => a.getValue())).toEqual(['scratch']);
    // The image's file system: each COPY <context dir>/ <dest>/ puts the context's files below dest.
    const image = new Map<string, string>();
    for (const copy of instructions.slice(1)) {
      const [source, destination] = copy.getArguments().map((a) => a.getValue());
      const files = tree(join(built.imageContext, source as string));
      for (const [path, mode] of Object.entries(files)) image.set(join(destination as string, path), mode);
    }
    expect(Object.fromEntries(image)).toEqual({
      [`${RUNTIME_DIR}/manifest.json`]: '644',
      [`${RUNTIME_DIR}/singulacomp-agent.mjs`]: '644',
      [`${RUNTIME_DIR}/singulacomp.mjs`]: '644',
      [AGENT_BINARY]: '755',
      [CLI_BINARY]: '755',
      [ENTRYPOINT_BINARY]: '755',
    });
    // The context holds the tarball's files, byte for byte.
    for (const file of built.files) {
      expect(readFileSync(join(built.imageContext, file.path)).equals(file.data), file.path).toBe(true);
    }

    const composed = composeSandboxDockerfile(null, { runtimeVersion: VERSION });
    if (!composed.ok) throw new Error(composed.error);
    const copies = DockerfileParser.parse(composed.dockerfile).getCOPYs();
    expect(copies).toHaveLength(2);
    for (const copy of copies) {
      expect(copy.getFlags().map((flag) => `${flag.getName()}=${flag.getValue()}`)).toEqual([
        `from=ghcr.io/singulacomp/runtime:${VERSION}`,
      ]);
      const sources = copy
        .getArguments()
        .slice(0, -1)
        .map((a) => a.getValue());
      for (const source of sources) {
        const present = source.endsWith('/')
          ? [...image.keys()].some((path) => path.startsWith(source))
          : image.has(source);
        expect(present, `${source} in the runtime image`).toBe(true);
      }
    }
  });

  describe('the package-form layer as E2B template steps, against a local download server', () => {
    let server: Server;
    let baseUrl: string;
    const requests: string[] = [];
    let tampered = false;

    beforeAll(async () => {
      server = createServer((req, res) => {
        requests.push(req.url ?? '');
        const name = (req.url ?? '').replace(/^\/runtime\//, '');
        const path = join(outA, name);
        if (!req.url?.startsWith('/runtime/') || name.includes('/') || !existsSync(path)) {
          res.writeHead(404).end();
          return;
        }
        let body = readFileSync(path);
        if (tampered && name === runtimeTarballName(VERSION)) body = Buffer.concat([body, Buffer.from('x')]);
        res.writeHead(200, { 'content-length': body.length }).end(body);
      });
      await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
      baseUrl = `http://127.0.0.1:${(server.address() as AddressInfo).port}/runtime`;
    });
    afterAll(async () => {
      await new Promise((resolve) => server?.close(resolve));
    });

    /**
     * The RUN step E2B would execute, as its SDK serialises our Dockerfile, with the image's
     * absolute paths moved below `root` (this test cannot write /opt or /usr/local/bin).
     */
    async function installStep(root: string, runtimeSha256: string | null): Promise<string> {
      const composed = composeSandboxDockerfile(null, {
        runtimeVersion: VERSION,
        runtimeSource: 'package',
        runtimeBaseUrl: baseUrl,
        runtimeSha256,
      });
      if (!composed.ok) throw new Error(composed.error);
      const { steps } = JSON.parse(
        await Template.toJSON(Template().fromDockerfile(composed.dockerfile), false),
      ) as {
        steps: Array<{ type: string; args: string[] }>;
      };
      const install = steps.filter(
        (step) => step.type === 'RUN' && step.args.join(' ').includes(runtimeTarballName(VERSION)),
      );
      expect(install).toHaveLength(1);
      const command = install[0]!.args.join(' ');
      expect(command).toContain(`${baseUrl}/${runtimeTarballName(VERSION)}`);
      if (runtimeSha256 !== null) expect(command).toContain(`expected=${runtimeSha256};`);
      else expect(command).toContain(`${baseUrl}/${runtimeChecksumName(VERSION)}`);
      return command
        .split(`${RUNTIME_PREFIX}/`)
        .join(`${root}${RUNTIME_PREFIX}/`)
        .split(`${RUNTIME_BIN_DIR}/`)
        .join(`${root}${RUNTIME_BIN_DIR}/`);
    }

    function sandboxRoot(): string {
      const root = mkdtempSync(join(tmpdir(), 'sc-runtime-root-'));
      mkdirSync(join(root, RUNTIME_BIN_DIR), { recursive: true });
      return root;
    }

    test.each([
      ['the published .sha256', false],
      ['a digest pinned in the Dockerfile', true],
    ])(
      'downloads, verifies against %s, installs, and the installed commands run',
      async (_, pinned) => {
        requests.length = 0;
        const root = sandboxRoot();
        try {
          const step = await installStep(root, pinned ? built.sha256 : null);
          const installed = await run('/bin/sh', ['-c', step], root);
          expect(installed.code, installed.stderr).toBe(0);
          expect(requests).toEqual(
            pinned
              ? [`/runtime/${runtimeTarballName(VERSION)}`]
              : [`/runtime/${runtimeTarballName(VERSION)}`, `/runtime/${runtimeChecksumName(VERSION)}`],
          );
          expect(tree(join(root, RUNTIME_DIR))).toEqual({
            'manifest.json': '644',
            'singulacomp-agent.mjs': '644',
            'singulacomp.mjs': '644',
          });
          expect(tree(join(root, RUNTIME_BIN_DIR))).toEqual({
            singulacomp: '755',
            'singulacomp-agent': '755',
            'singulacomp-entrypoint': '755',
          });
          for (const file of built.files) {
            const target = file.path.startsWith('bin/')
              ? join(root, RUNTIME_BIN_DIR, file.path.slice(4))
              : join(root, RUNTIME_DIR, file.path.slice('runtime/'.length));
            expect(readFileSync(target).equals(file.data), file.path).toBe(true);
          }
          const help = await run(join(root, CLI_BINARY), ['--help'], root, {
            SINGULACOMP_RUNTIME_DIR: join(root, RUNTIME_DIR),
          });
          expect(help.code, help.stderr).toBe(0);
          expect(help.stdout).toContain('Usage: singulacomp');
        } finally {
          rmSync(root, { recursive: true, force: true });
        }
      },
      120_000,
    );

    test('a tarball that does not match its checksum is refused and nothing is installed', async () => {
      const root = sandboxRoot();
      tampered = true;
      try {
        const step = await installStep(root, built.sha256);
        const installed = await run('/bin/sh', ['-c', step], root);
        expect(installed.code).toBe(1);
        expect(installed.stderr).toContain(
          `singulacomp: ${runtimeTarballName(VERSION)} has SHA-256 ${sha256(Buffer.concat([readFileSync(built.tarball), Buffer.from('x')]))}, expected ${built.sha256}`,
        );
        expect(existsSync(join(root, RUNTIME_DIR))).toBe(false);
        expect(readdirSync(join(root, RUNTIME_BIN_DIR))).toEqual([]);
      } finally {
        tampered = false;
        rmSync(root, { recursive: true, force: true });
      }
    });
  });

  test('a second build into the same directory replaces the image context and keeps the checksum file true', async () => {
    writeFileSync(join(built.imageContext, 'stale-file'), 'left over');
    const rebuilt = await buildRuntimePackage({ outDir: outA, version: VERSION });
    expect(rebuilt.sha256).toBe(built.sha256);
    expect(existsSync(join(rebuilt.imageContext, 'stale-file'))).toBe(false);
    expect(readFileSync(rebuilt.checksumFile, 'utf8')).toBe(
      `${built.sha256}  ${runtimeTarballName(VERSION)}\n`,
    );
  });
});
