// The control-plane image (deploy/Dockerfile) built with Podman from this checkout, FROM the local
// base image, and tagged by the content of everything that goes into it: a later call with the same
// inputs finds the image and builds nothing (Podman's storage is machine-wide).
import { execFileSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { readFileSync, readdirSync, statSync } from 'node:fs';
import { join, relative } from 'node:path';
import {
  APP_PATHS,
  IGNORE_FILE,
  externalPackages,
  ignoreFileText,
} from '../../scripts/container/server-ignore.mjs';
import { baseImage } from './podman';

const ROOT = new URL('../..', import.meta.url).pathname;
export const DOCKERFILE = join(ROOT, 'deploy/Dockerfile');
export { APP_PATHS, IGNORE_FILE, externalPackages, ignoreFileText };

function hashTree(hash: ReturnType<typeof createHash>, path: string): void {
  const full = join(ROOT, path);
  if (statSync(full).isDirectory()) {
    for (const entry of readdirSync(full).sort()) hashTree(hash, join(path, entry));
    return;
  }
  hash.update(`${relative(ROOT, full)}\0`);
  hash.update(readFileSync(full));
}

/** The image's tag: a hash of the base, the Dockerfile, the ignore file, the app files and the packages' lock entries. */
export function serverImageKey(base: string): string {
  const hash = createHash('sha256');
  hash.update(`${base}\0`);
  hash.update(readFileSync(DOCKERFILE));
  hash.update(readFileSync(IGNORE_FILE));
  for (const path of APP_PATHS) hashTree(hash, path);
  const lock = JSON.parse(readFileSync(join(ROOT, 'package-lock.json'), 'utf8')).packages;
  for (const path of externalPackages())
    hash.update(`${path}@${lock[path].version}:${lock[path].integrity}\0`);
  return hash.digest('hex').slice(0, 16);
}

export interface ServerImage {
  ref: string;
  base: string;
  /** false: an image with this content's tag existed. */
  built: boolean;
  buildMs: number;
}

/** Builds deploy/Dockerfile unless an image of the same inputs exists. `containersConf`: Podman's settings (runc, ulimits). */
export function serverImage(containersConf: string): ServerImage {
  const base = baseImage();
  const ref = `localhost/singulacomp-server:${serverImageKey(base)}`;
  const env = { ...process.env, CONTAINERS_CONF: containersConf };
  const image = buildUnlessPresent(ref, base, env, [
    '--format',
    'docker',
    '--file',
    DOCKERFILE,
    '--ignorefile',
    IGNORE_FILE,
    '--build-arg',
    `BASE=${base}`,
    '--tag',
    ref,
    ROOT,
  ]);
  if (!image.built) return image;
  // Older builds of this repository's image would pile up in the machine-wide storage. Best effort:
  // other test files remove their images meanwhile, and Podman's listing can fail on an image that
  // went away under it ("image not known").
  let tags = '';
  try {
    tags = execFileSync(
      'podman',
      ['images', '--format', '{{.Repository}}:{{.Tag}}', 'localhost/singulacomp-server'],
      {
        env,
        encoding: 'utf8',
        stdio: ['ignore', 'pipe', 'ignore'],
      },
    );
  } catch {
    // listed again by the next build
  }
  for (const old of tags.split('\n').filter((t) => t && t !== ref)) {
    try {
      execFileSync('podman', ['rmi', old], { env, stdio: 'ignore' });
    } catch {
      // in use by a container: left for a later build
    }
  }
  return image;
}

/** An image's size in bytes (Podman's own count, as `podman images` shows it). */
export function imageSize(ref: string, containersConf: string): number {
  const out = execFileSync('podman', ['image', 'inspect', ref, '--format', '{{.Size}}'], {
    env: { ...process.env, CONTAINERS_CONF: containersConf },
    encoding: 'utf8',
  });
  return Number(out.trim());
}

const SERVICES_DOCKERFILE = join(ROOT, 'deploy/compose/Dockerfile.services');

/**
 * The compose file's backing services (PostgreSQL, Redis, nginx from Debian's packages) built from
 * deploy/compose/Dockerfile.services FROM the local base, tagged by a hash of the base, that file
 * and the script it copies. The build installs packages from the Debian mirror the host uses (host network).
 */
export function servicesImage(containersConf: string): ServerImage {
  const base = baseImage();
  const hash = createHash('sha256');
  hash.update(`${base}\0`);
  hashTree(hash, 'deploy/compose/Dockerfile.services');
  hashTree(hash, 'deploy/compose/postgres.sh');
  const ref = `localhost/singulacomp-services:${hash.digest('hex').slice(0, 16)}`;
  const env = { ...process.env, CONTAINERS_CONF: containersConf };
  return buildUnlessPresent(ref, base, env, [
    '--network',
    'host',
    '--file',
    SERVICES_DOCKERFILE,
    '--build-arg',
    `BASE=${base}`,
    '--tag',
    ref,
    join(ROOT, 'deploy/compose'),
  ]);
}

/** `podman build` with `args` (after `--runtime runc build`) unless `ref` already exists. */
function buildUnlessPresent(ref: string, base: string, env: NodeJS.ProcessEnv, args: string[]): ServerImage {
  try {
    execFileSync('podman', ['image', 'exists', ref], { env, stdio: 'ignore' });
    return { ref, base, built: false, buildMs: 0 };
  } catch {
    // not built yet
  }
  const started = Date.now();
  execFileSync('podman', ['--runtime', 'runc', 'build', ...args], {
    env,
    stdio: ['ignore', 'pipe', 'pipe'],
    timeout: 15 * 60_000,
    maxBuffer: 64 * 1024 * 1024,
  });
  return { ref, base, built: true, buildMs: Date.now() - started };
}
