// The esbuild settings every bundle for plain `node` shares: the daemon (scripts/bundles.mjs,
// dist/singulacomp-agent.mjs), the server (scripts/bundles.mjs, dist/server.mjs, with its own
// plugins), the CLI (scripts/build-cli.mjs, dist/singulacomp.mjs) and the runtime package's copies
// of the daemon and the CLI (scripts/build-runtime.ts).
import { isBuiltin } from 'node:module';

/** The bundles' syntax target; the runtime layer installs Node.js 22. */
export const NODE_TARGET = 'node22';

/**
 * Node's own modules through `process.getBuiltinModule` rather than `import … from 'node:…'`: an ES
 * import of a built-in fills the module namespace from every export, which runs Node's lazy getters
 * (`node:http` then loads undici, http2, tls and zlib: ~14 MiB resident and a few ms for nothing).
 * esbuild reads the exports off the module object on use instead.
 */
export const builtinsOnUse = {
  name: 'builtins-on-use',
  setup(build) {
    build.onResolve({ filter: /^[a-z_:/]+$/ }, (args) =>
      isBuiltin(args.path)
        ? { path: args.path.startsWith('node:') ? args.path : `node:${args.path}`, namespace: 'node-builtin' }
        : undefined,
    );
    build.onLoad({ filter: /.*/, namespace: 'node-builtin' }, (args) => ({
      contents: `module.exports = process.getBuiltinModule(${JSON.stringify(args.path)});`,
      loader: 'js',
    }));
  },
};

/**
 * Escapes the non-ASCII text esbuild leaves in a bundle: the comments it keeps (its `charset: 'ascii'`
 * default already escapes strings, identifiers and regular expressions). One non-ASCII character makes
 * V8 hold the whole source as a two-byte string, twice the bundle's size resident: ~0.25 MiB in the
 * daemon, ~10 MiB in the server. Each UTF-16 unit becomes `\uXXXX`, which means the same in a
 * comment, a string or a regular expression.
 */
export const asciiOutput = {
  name: 'ascii-output',
  setup(build) {
    build.onEnd((result) => {
      if (!result.outputFiles) return;
      result.outputFiles = result.outputFiles.map((file) => {
        // The JavaScript, whether named by outfile or written to <stdout> (no outfile).
        if (/\.(map|json)$/.test(file.path)) return file;
        const text = file.text.replace(
          /[\u0080-\uffff]/g,
          (unit) => `\\u${unit.charCodeAt(0).toString(16).padStart(4, '0')}`,
        );
        if (text === file.text) return file;
        const contents = new TextEncoder().encode(text);
        return { path: file.path, contents, hash: file.hash, text };
      });
    });
  },
};

/**
 * One ES module for plain node with every dependency inside. `entry` is absolute, or relative to
 * `absWorkingDir`; `overrides` are merged last (outfile, write, metafile, …), except that their
 * `plugins` take the place of builtinsOnUse only: asciiOutput runs on every bundle.
 */
export function nodeBundleOptions(entry, overrides = {}) {
  return {
    entryPoints: [entry],
    bundle: true,
    platform: 'node',
    format: 'esm',
    target: NODE_TARGET,
    // CommonJS dependencies (pino, commander, ws) call require() for anything else they load.
    banner: {
      js: "import { createRequire as __createRequire } from 'node:module'; const require = __createRequire(import.meta.url);",
    },
    legalComments: 'none',
    logLevel: 'warning',
    ...overrides,
    plugins: [...(overrides.plugins ?? [builtinsOnUse]), asciiOutput],
  };
}
