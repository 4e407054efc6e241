// Where the SingulaComp runtime (daemon, CLI, entrypoint) lives: inside the runtime package and
// runtime image (scripts/build-runtime.ts writes them) and inside every sandbox image (dockerfile.ts
// installs them). One source of truth for those paths and file names.

/** Everything SingulaComp installs into an image besides the three commands. */
export const RUNTIME_PREFIX = '/opt/singulacomp';
/** The bundled JavaScript the commands run (`runtime/` in the package). */
export const RUNTIME_DIR = `${RUNTIME_PREFIX}/runtime`;
/** Where the three commands are installed (`bin/` in the package). */
export const RUNTIME_BIN_DIR = '/usr/local/bin';

/** Top-level directories of the runtime package (tarball and runtime-image build context). */
export const PACKAGE_RUNTIME_DIR = 'runtime';
export const PACKAGE_BIN_DIR = 'bin';

/** The commands, by file name under `bin/` (and `/usr/local/bin/`). */
export const AGENT_COMMAND = 'singulacomp-agent';
export const CLI_COMMAND = 'singulacomp';
export const ENTRYPOINT_COMMAND = 'singulacomp-entrypoint';
export const RUNTIME_COMMANDS = [AGENT_COMMAND, CLI_COMMAND, ENTRYPOINT_COMMAND] as const;

/** The bundles under `runtime/` that the daemon's and the CLI's launchers run. */
export const AGENT_BUNDLE = 'singulacomp-agent.mjs';
export const CLI_BUNDLE = 'singulacomp.mjs';
/** Version, Node.js target and per-file SHA-256 of the package, under `runtime/`. */
export const RUNTIME_MANIFEST = 'manifest.json';
/**
 * Node.js flags the daemon runs with, wherever it runs (the launcher below, the LOCAL provider's
 * entry command, the bench). V8's young generation may grow to 16 MiB per semi-space; the idle
 * daemon allocates little, and capping it at 1 MiB keeps about 1.3 MiB less resident in every
 * sandbox, with no difference in proxy latency that the proxy bench can tell from noise.
 */
export const AGENT_NODE_FLAGS = ['--max-semi-space-size=1'] as const;
/** The Node.js the launchers prefer (the runtime layer installs it); else `node` on PATH. */
export const RUNTIME_NODE = `${RUNTIME_PREFIX}/bin/node`;

export const AGENT_BINARY = `${RUNTIME_BIN_DIR}/${AGENT_COMMAND}`;
export const CLI_BINARY = `${RUNTIME_BIN_DIR}/${CLI_COMMAND}`;
export const ENTRYPOINT_BINARY = `${RUNTIME_BIN_DIR}/${ENTRYPOINT_COMMAND}`;

/** File name of the runtime tarball for one version (`package` source). */
export function runtimeTarballName(runtimeVersion: string): string {
  return `singulacomp-runtime-${runtimeVersion}-linux-x64.tar.gz`;
}

/** The checksum file published next to the tarball (`sha256sum` format: `<hex>  <name>`). */
export function runtimeChecksumName(runtimeVersion: string): string {
  return `${runtimeTarballName(runtimeVersion)}.sha256`;
}
