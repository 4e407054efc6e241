// The esbuild bundles under dist/: the daemon (plain node in sandboxes and the image) and the
// server (what `npm start` runs). Each build records the files it read in <outfile>.inputs.json, so
// `npm start` tells with one stat per file whether a bundle still matches its sources and rebuilds
// only one that does not (scripts/start.mjs). Plain JavaScript: it runs before anything could load
// TypeScript.
import { existsSync, mkdirSync, readFileSync, renameSync, statSync, writeFileSync } from 'node:fs';
import { readFile } from 'node:fs/promises';
import { dirname, join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';
import { nodeBundleOptions } from './esbuild-settings.mjs';

const ROOT = fileURLToPath(new URL('..', import.meta.url));
const SELF = relative(ROOT, fileURLToPath(import.meta.url));
const SETTINGS = relative(ROOT, fileURLToPath(new URL('./esbuild-settings.mjs', import.meta.url)));

/**
 * The daemon as one file for plain node, no node_modules at run time: the LOCAL provider launches
 * it, and the image's runtime layer installs the same file as /usr/local/bin/singulacomp-agent.
 * Its settings are the ones every node bundle shares (scripts/esbuild-settings.mjs).
 */
export const AGENT = nodeBundleOptions('agent/main.ts', { outfile: 'dist/singulacomp-agent.mjs' });

/**
 * Our sources say where their files are (migrations, the dashboard, the daemon bundle, the CLI)
 * relative to themselves, through import.meta.url: in the bundle each one keeps its own file's URL,
 * computed from the bundle's location, so the checkout can move.
 */
const keepFileUrls = {
  name: 'keep-file-urls',
  setup(build) {
    build.onLoad({ filter: /\.[cm]?ts$/ }, async (args) => {
      const file = relative(ROOT, args.path);
      if (file.startsWith('node_modules/')) return undefined;
      let text = await readFile(args.path, 'utf8');
      if (/import\.meta\.(dirname|filename)/.test(text)) {
        throw new Error(`${file}: use import.meta.url (the server bundle rewrites only that)`);
      }
      const url = `new URL(${JSON.stringify(relative(dirname(join(ROOT, SERVER.outfile)), args.path))}, import.meta.url).href`;
      text = text.replaceAll('import.meta.url', url);
      return { contents: text, loader: 'ts' };
    });
  },
};

/**
 * The server (server/main.ts) and every package it loads in one file: Node then reads one file
 * instead of resolving and loading some two thousand, and no TypeScript loader runs. Packages that
 * find their own files next to themselves (PGlite's WebAssembly, Prisma's query compiler, GraphiQL's
 * assets, pino's workers) stay in node_modules, and so does dockerode (docker-modem loads ssh2,
 * whose optional native bindings esbuild cannot bundle).
 */
export const SERVER = nodeBundleOptions('server/main.ts', {
  outfile: 'dist/server.mjs',
  external: [
    '@electric-sql/pglite',
    '@prisma/client',
    '@graphql-yoga/render-graphiql',
    'pino',
    'pino-pretty',
    'dockerode',
  ],
  plugins: [keepFileUrls],
});

// npm rewrites this file on every install, while packages keep their tarballs' mtimes: a changed
// dependency shows here, not on its own files.
const INSTALL_MARKER = 'node_modules/.package-lock.json';

/** Why the bundle must be rebuilt (missing, or an input changed or is gone), or null when it is fresh. */
export function staleReason(bundle) {
  const outfile = join(ROOT, bundle.outfile);
  let record;
  try {
    record = JSON.parse(readFileSync(`${outfile}.inputs.json`, 'utf8'));
    statSync(outfile);
  } catch {
    return `${bundle.outfile} is missing`;
  }
  for (const input of [INSTALL_MARKER, ...record.inputs]) {
    let mtimeMs;
    try {
      mtimeMs = statSync(join(ROOT, input)).mtimeMs;
    } catch {
      if (input === INSTALL_MARKER) continue;
      return `${input} is gone`;
    }
    // Against the time the build started: an edit made while it ran counts as newer.
    if (mtimeMs >= record.startedAt) return `${input} changed`;
  }
  return null;
}

/**
 * Builds one bundle, writes it atomically (a concurrent `npm start` never reads half a file) and
 * records its inputs: the sources, the bundled packages' files and this script. Returns the
 * milliseconds it took.
 */
export async function buildBundle(bundle) {
  const { build } = await import('esbuild');
  const startedAt = Date.now();
  const result = await build({ ...bundle, absWorkingDir: ROOT, write: false, metafile: true });
  const tmp = `.${process.pid}.${startedAt}.tmp`;
  for (const file of result.outputFiles) {
    mkdirSync(dirname(file.path), { recursive: true });
    writeFileSync(`${file.path}${tmp}`, file.contents);
    renameSync(`${file.path}${tmp}`, file.path);
  }
  const inputs = [...Object.keys(result.metafile.inputs), SELF, SETTINGS].filter((input) =>
    existsSync(join(ROOT, input)),
  );
  const record = join(ROOT, `${bundle.outfile}.inputs.json`);
  writeFileSync(`${record}${tmp}`, `${JSON.stringify({ startedAt, inputs: [...new Set(inputs)] })}\n`);
  renameSync(`${record}${tmp}`, record);
  return Date.now() - startedAt;
}
