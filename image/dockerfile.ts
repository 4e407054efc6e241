// The SingulaComp runtime layer (R-IMG-2), appended after the final stage of the user's
// Dockerfile (read with dockerfile-parser.ts).
//
// Composition is a pure function: same input and options → same bytes. The output uses LF line
// endings; a CRLF or BOM-prefixed input is normalised first.

import {
  escapeRegExp,
  normalizeDockerfileText,
  parseDockerfile,
  splitArguments,
  splitFlags,
} from './dockerfile-parser';
import {
  AGENT_BINARY,
  CLI_BINARY,
  ENTRYPOINT_BINARY,
  PACKAGE_BIN_DIR,
  PACKAGE_RUNTIME_DIR,
  RUNTIME_BIN_DIR,
  RUNTIME_COMMANDS,
  RUNTIME_DIR,
  RUNTIME_PREFIX,
  runtimeChecksumName,
  runtimeTarballName,
} from './runtime-layout';

export {
  AGENT_BINARY,
  CLI_BINARY,
  ENTRYPOINT_BINARY,
  runtimeChecksumName,
  runtimeTarballName,
} from './runtime-layout';

/** Bump when the layer's shape changes so every snapshot key changes with it. */
export const RUNTIME_LAYER_FORMAT = 1;

export const DEFAULT_BASE_IMAGE = 'ubuntu:24.04';
export const SANDBOX_WORKSPACE = '/workspace';
export const SANDBOX_SERVICE_PORT = 8000;
const PREFIX = RUNTIME_PREFIX;

/**
 * How the runtime (daemon, CLI, entrypoint and `/opt/singulacomp/runtime/`) gets into the image.
 *
 * - `image`: `COPY --from=<runtimeImage>:<runtimeVersion>` — needs a builder that can pull another
 *   image during the build (BuildKit; Daytona, Platinum).
 * - `package`: RUN steps only, so the output stays a single-stage Dockerfile without `COPY --from`
 *   (E2B's template builder). The layer downloads
 *   `<runtimeBaseUrl>/singulacomp-runtime-<runtimeVersion>-linux-x64.tar.gz` — the same files the
 *   runtime image carries: `runtime/…` (→ /opt/singulacomp/runtime/) and `bin/singulacomp-agent`,
 *   `bin/singulacomp`, `bin/singulacomp-entrypoint` (→ /usr/local/bin/) — verifies its SHA-256
 *   and unpacks it. `npm run build:runtime` (scripts/build-runtime.ts) builds that tarball, its
 *   `.sha256` and the runtime image's build context; image/runtime-layout.ts names the paths. A tarball rather than `npm install -g`: the binaries are the image's own
 *   (no Node.js needed before they land, no dependency tree resolved at build time), and the pinned
 *   digest makes the bytes that end up in the image a function of the Dockerfile alone.
 */
export type RuntimeSource = 'image' | 'package';

export const DEFAULT_RUNTIME_IMAGE = 'ghcr.io/singulacomp/runtime';
export const DEFAULT_RUNTIME_BASE_URL = 'https://downloads.singulacomp.dev/runtime';

export interface ComposeSandboxDockerfileOptions {
  /** Version of the SingulaComp runtime (daemon, CLI, entrypoint) baked into the image. */
  runtimeVersion: string;
  /** @default 'image' */
  runtimeSource?: RuntimeSource;
  /** Image the daemon, CLI and entrypoint are copied from, tagged with `runtimeVersion` (`image`).
   * @default 'ghcr.io/singulacomp/runtime' */
  runtimeImage?: string;
  /** Where the runtime tarball is downloaded from (`package`); http(s), no trailing slash needed.
   * @default 'https://downloads.singulacomp.dev/runtime' */
  runtimeBaseUrl?: string;
  /**
   * Expected SHA-256 (hex) of the runtime tarball (`package`). Without it the layer checks the
   * tarball against the `<tarball>.sha256` published next to it (catches a corrupted or truncated
   * download, not a tampered release); with it the digest is pinned in the Dockerfile.
   */
  runtimeSha256?: string | null;
  /** @default '22' */
  nodeVersion?: string;
  /** @default '10.18.3' */
  pnpmVersion?: string;
  /** @default '0.9.5' */
  uvVersion?: string;
  /** @default '3.12' */
  pythonVersion?: string;
  /** @default '1.3.1' */
  bunVersion?: string;
  /** @default '1.18.33' */
  opencodeVersion?: string;
  /** @default '0.5.0' */
  agentBrowserVersion?: string;
  /**
   * The package floor: the apt/dnf RUN (git, build tools, LibreOffice, pandoc, tesseract …) and the
   * toolchain downloads (pnpm + Node.js, uv + Python, OpenCode, Bun, agent-browser). false leaves
   * both out; the runtime image (`image` source) then also provides Node.js and OpenCode in
   * /opt/singulacomp/bin/ (the DOCKER provider's locally built runtime image does), so a
   * sandbox image builds without any network. @default true
   */
  packageFloor?: boolean;
}

export interface FinalStage {
  /** 0-based index of the final stage among the FROM instructions. */
  index: number;
  baseImage: string;
  name: string | null;
  /** The last USER of the final stage, or null when it never switches user. */
  user: string | null;
}

export type ComposeSandboxDockerfileResult =
  | { ok: true; dockerfile: string; finalStage: FinalStage; warnings: string[] }
  | { ok: false; error: string };

const VERSION = /^[A-Za-z0-9][A-Za-z0-9._+-]{0,63}$/;
const IMAGE = /^[A-Za-z0-9][A-Za-z0-9._/:@-]{0,254}$/;
const BASE_URL = /^https?:\/\/[A-Za-z0-9._~:/%@+=-]+$/;
const SHA256 = /^[0-9a-f]{64}$/;
const SAFE_USER = /^[A-Za-z0-9_][A-Za-z0-9_.-]*(?::[A-Za-z0-9_][A-Za-z0-9_.-]*)?$/;

function option(value: string | undefined, fallback: string, name: string, pattern = VERSION): string {
  const chosen = value ?? fallback;
  if (!pattern.test(chosen))
    throw new TypeError(`composeSandboxDockerfile: invalid ${name} ${JSON.stringify(chosen)}`);
  return chosen;
}

/** A Dockerfile for a template that names an image instead of a Dockerfile. */
export function dockerfileForImage(reference: string): string {
  return `FROM ${reference}\n`;
}

function isRootUser(user: string): boolean {
  const name = user.split(':', 1)[0];
  return name === 'root' || name === '0';
}

/** Joins shell statements into one RUN whose physical lines end with the file's escape char. */
function run(escapeChar: string, statements: string[]): string {
  for (const statement of statements) {
    // A physical line starting with '#' inside a continuation would be dropped as a comment.
    const trimmed = statement.trim();
    if (trimmed.startsWith('#') || trimmed.endsWith(escapeChar) || statement.includes('\n')) {
      throw new Error(`runtime layer statement cannot be embedded: ${statement}`);
    }
  }
  return `RUN ${statements.join(` ${escapeChar}\n    `)}`;
}

/**
 * Returns the user's Dockerfile (or `FROM ubuntu:24.04`) with the runtime layer appended after its
 * final stage. The final stage must be Debian/Ubuntu (apt-get) or Fedora/RHEL (dnf) based.
 */
export function composeSandboxDockerfile(
  userDockerfile: string | null,
  options: ComposeSandboxDockerfileOptions,
): ComposeSandboxDockerfileResult {
  const runtimeVersion = option(options.runtimeVersion, '', 'runtimeVersion');
  const runtimeSource: RuntimeSource = options.runtimeSource ?? 'image';
  if (runtimeSource !== 'image' && runtimeSource !== 'package')
    throw new TypeError(`composeSandboxDockerfile: invalid runtimeSource ${JSON.stringify(runtimeSource)}`);
  const runtimeImage = option(options.runtimeImage, DEFAULT_RUNTIME_IMAGE, 'runtimeImage', IMAGE);
  const runtimeBaseUrl = option(
    options.runtimeBaseUrl,
    DEFAULT_RUNTIME_BASE_URL,
    'runtimeBaseUrl',
    BASE_URL,
  ).replace(/\/+$/, '');
  const runtimeSha256 = options.runtimeSha256 ?? null;
  if (runtimeSha256 !== null && !SHA256.test(runtimeSha256))
    throw new TypeError('composeSandboxDockerfile: runtimeSha256 must be 64 lowercase hex characters');
  const node = option(options.nodeVersion, '22', 'nodeVersion');
  const pnpm = option(options.pnpmVersion, '10.18.3', 'pnpmVersion');
  const uv = option(options.uvVersion, '0.9.5', 'uvVersion');
  const python = option(options.pythonVersion, '3.12', 'pythonVersion');
  const bun = option(options.bunVersion, '1.3.1', 'bunVersion');
  const opencode = option(options.opencodeVersion, '1.18.33', 'opencodeVersion');
  const agentBrowser = option(options.agentBrowserVersion, '0.5.0', 'agentBrowserVersion');
  const packageFloor = options.packageFloor ?? true;
  if (!packageFloor && runtimeSource !== 'image')
    throw new TypeError('composeSandboxDockerfile: packageFloor false needs the image runtime source');

  const source = normalizeDockerfileText(userDockerfile ?? `FROM ${DEFAULT_BASE_IMAGE}\n`);
  const parsed = parseDockerfile(source);
  if (parsed.unterminatedHeredoc !== null) {
    return {
      ok: false,
      error: `the heredoc <<${parsed.unterminatedHeredoc} is never closed; add a line containing only ${parsed.unterminatedHeredoc}`,
    };
  }
  const froms = parsed.instructions.filter((instruction) => instruction.keyword === 'FROM');
  const lastFrom = froms.at(-1);
  if (!lastFrom)
    return {
      ok: false,
      error: 'the Dockerfile has no FROM instruction; start it with e.g. FROM ubuntu:24.04',
    };
  const fromArgs = splitArguments(splitFlags(lastFrom.args).rest);
  const asIndex = fromArgs.findIndex((part) => part.toLowerCase() === 'as');
  const finalStageInstructions = parsed.instructions.slice(parsed.instructions.indexOf(lastFrom) + 1);
  const lastUser = finalStageInstructions.filter((instruction) => instruction.keyword === 'USER').at(-1);
  const finalStage: FinalStage = {
    index: froms.length - 1,
    baseImage: fromArgs[0] ?? '',
    name: asIndex >= 0 ? (fromArgs[asIndex + 1] ?? null) : null,
    user: lastUser ? lastUser.args : null,
  };

  const warnings: string[] = [];
  let text = source;
  const e = parsed.escapeChar;
  if (parsed.danglingContinuation) {
    // Otherwise the first line of the runtime layer would be swallowed by the user's last instruction.
    const lines = text.split('\n');
    const continuation = new RegExp(`${escapeRegExp(e)}[ \\t]*$`);
    for (let i = lines.length - 1; i >= 0; i--) {
      if (continuation.test(lines[i]!)) {
        lines[i] = lines[i]!.replace(continuation, '');
        break;
      }
    }
    text = lines.join('\n');
    warnings.push(
      'the Dockerfile ended inside a line continuation; the trailing escape character was removed',
    );
  }
  text = text.replace(/\s*$/, '\n');

  const restoreUser = finalStage.user !== null && !isRootUser(finalStage.user) ? finalStage.user : null;
  const ownerStatements: string[] = [];
  if (restoreUser !== null) {
    if (SAFE_USER.test(restoreUser)) {
      ownerStatements.push(`chown ${restoreUser} ${SANDBOX_WORKSPACE} ${PREFIX}/home`);
    } else {
      warnings.push(
        `USER ${restoreUser}: not a plain user[:group]; ${SANDBOX_WORKSPACE} stays owned by root, so chown it yourself`,
      );
    }
  }

  const packaged = runtimeSource === 'package';
  // The daemon, CLI, entrypoint and runtime tree: copied from the runtime image, or (package) a
  // checksum-verified tarball unpacked by RUN steps so the Dockerfile stays single-stage.
  const tarball = runtimeTarballName(runtimeVersion);
  const tarballUrl = `${runtimeBaseUrl}/${tarball}`;
  const runtimeInstall = packaged
    ? [
        run(e, [
          'set -eu;',
          'tmp="$(mktemp -d)"; cd "$tmp";',
          `curl -fsSL --retry 3 -o runtime.tar.gz ${tarballUrl};`,
          runtimeSha256 !== null
            ? `expected=${runtimeSha256};`
            : `curl -fsSL --retry 3 -o runtime.tar.gz.sha256 ${runtimeBaseUrl}/${runtimeChecksumName(runtimeVersion)}; expected="$(cut -d ' ' -f 1 runtime.tar.gz.sha256)";`,
          `actual="$(sha256sum runtime.tar.gz | cut -d ' ' -f 1)";`,
          `if [ "$actual" != "$expected" ]; then echo "singulacomp: ${tarball} has SHA-256 $actual, expected $expected" >&2; exit 1; fi;`,
          `mkdir -p unpacked ${RUNTIME_DIR};`,
          'tar -xzf runtime.tar.gz -C unpacked --no-same-owner;',
          `cp -R unpacked/${PACKAGE_RUNTIME_DIR}/. ${RUNTIME_DIR}/;`,
          `cp ${RUNTIME_COMMANDS.map((command) => `unpacked/${PACKAGE_BIN_DIR}/${command}`).join(' ')} ${RUNTIME_BIN_DIR}/;`,
          'cd /; rm -rf "$tmp"',
        ]),
      ]
    : [
        `COPY --from=${runtimeImage}:${runtimeVersion} ${RUNTIME_DIR}/ ${RUNTIME_DIR}/`,
        `COPY --from=${runtimeImage}:${runtimeVersion} ${AGENT_BINARY} ${CLI_BINARY} ${ENTRYPOINT_BINARY} ${RUNTIME_BIN_DIR}/`,
      ];
  // E2B's Dockerfile reader drops backslashes inside RUN and keeps quotes inside ENV values, so the
  // package layer avoids both (echo instead of printf '\n', an unquoted PATH without spaces).
  const agentBrowserWrapper = packaged
    ? [
        `echo '#!/bin/sh' > ${PREFIX}/bin/agent-browser;`,
        `echo 'PLAYWRIGHT_BROWSERS_PATH=${PREFIX}/browsers exec ${PREFIX}/npm-global/bin/agent-browser "$@"' >> ${PREFIX}/bin/agent-browser;`,
      ]
    : [
        `printf '%s\\n' '#!/bin/sh' 'PLAYWRIGHT_BROWSERS_PATH=${PREFIX}/browsers exec ${PREFIX}/npm-global/bin/agent-browser "$@"'`,
        `> ${PREFIX}/bin/agent-browser;`,
      ];
  // Docker's default shell is already /bin/sh -c; the package layer resets SHELL only after a user
  // SHELL (E2B ignores SHELL and warns about it).
  const userShell = finalStageInstructions.some((instruction) => instruction.keyword === 'SHELL');
  const resetShell = !packaged || userShell;

  // Both layers end alike: the workspace, the service port, the user's own USER again, our entry.
  const closing = [
    `ENV SINGULACOMP_WORKSPACE=${SANDBOX_WORKSPACE}`,
    `WORKDIR ${SANDBOX_WORKSPACE}`,
    `EXPOSE ${SANDBOX_SERVICE_PORT}`,
    ...(restoreUser !== null ? [`USER ${restoreUser}`] : []),
    `ENTRYPOINT ["${ENTRYPOINT_BINARY}"]`,
    'CMD []',
  ];

  if (!packageFloor) {
    // Everything from the runtime image, nothing downloaded: its /opt/singulacomp/bin/ carries
    // Node.js and OpenCode.
    const minimal = [
      `# ---- SingulaComp runtime layer: runtime ${runtimeVersion} (no package floor), layer format ${RUNTIME_LAYER_FORMAT}. Generated; do not edit. ----`,
      'USER root',
      'SHELL ["/bin/sh", "-c"]',
      ...runtimeInstall,
      `COPY --from=${runtimeImage}:${runtimeVersion} ${PREFIX}/bin/ ${PREFIX}/bin/`,
      run(e, [
        'set -eu;',
        `mkdir -p ${PREFIX}/home ${SANDBOX_WORKSPACE};`,
        `chmod 755 ${AGENT_BINARY} ${CLI_BINARY} ${ENTRYPOINT_BINARY};`,
        ...ownerStatements.map((statement) => `${statement};`),
        'true',
      ]),
      `ENV PATH="\${PATH}:${PREFIX}/bin"`,
      ...closing,
    ];
    return { ok: true, dockerfile: `${text}\n${minimal.join('\n')}\n`, finalStage, warnings };
  }

  const layer = [
    `# ---- SingulaComp runtime layer: runtime ${runtimeVersion}${packaged ? ' (package)' : ''}, layer format ${RUNTIME_LAYER_FORMAT}. Generated; do not edit. ----`,
    'USER root',
    // The user's SHELL may be anything (bash with options, pwsh); the layer's scripts are POSIX sh.
    ...(resetShell ? ['SHELL ["/bin/sh", "-c"]'] : []),
    run(e, [
      'set -eu;',
      'if command -v apt-get >/dev/null 2>&1; then',
      'export DEBIAN_FRONTEND=noninteractive;',
      'apt-get update;',
      'apt-get install -y --no-install-recommends ca-certificates git curl build-essential ffmpeg tmux xz-utils unzip',
      'libreoffice-writer libreoffice-calc libreoffice-impress pandoc tesseract-ocr tesseract-ocr-eng;',
      'rm -rf /var/lib/apt/lists/*;',
      'elif command -v dnf >/dev/null 2>&1; then',
      'dnf install -y ca-certificates git curl gcc gcc-c++ make ffmpeg-free tmux xz unzip',
      'libreoffice-writer libreoffice-calc libreoffice-impress pandoc tesseract tesseract-langpack-eng;',
      'dnf clean all;',
      'else echo "singulacomp: the final stage needs apt-get or dnf (a glibc distribution)" >&2; exit 1; fi',
    ]),
    ...runtimeInstall,
    // Our tools live under /opt/singulacomp and are reached through PATH's tail, so whatever the
    // user installed (their node, python, pnpm …) keeps precedence. Tool homes are set per RUN,
    // never as ENV, so the user's own pnpm/uv/playwright configuration is untouched.
    run(e, [
      'set -eu;',
      `mkdir -p ${PREFIX}/bin ${PREFIX}/home ${SANDBOX_WORKSPACE};`,
      `export PNPM_HOME=${PREFIX}/pnpm SHELL=/bin/sh PATH="${PREFIX}/bin:${PREFIX}/pnpm:$PATH";`,
      // Downloads go to files first: sh has no pipefail, so `curl | sh` would hide a failed download.
      'tmp="$(mktemp -d)"; cd "$tmp";',
      'curl -fsSL https://get.pnpm.io/install.sh -o pnpm-install.sh;',
      `env PNPM_VERSION=${pnpm} sh pnpm-install.sh;`,
      `pnpm env use --global ${node};`,
      `ln -sf ${PREFIX}/pnpm/pnpm ${PREFIX}/pnpm/node ${PREFIX}/pnpm/npm ${PREFIX}/pnpm/npx ${PREFIX}/bin/;`,
      `curl -LsSf https://astral.sh/uv/${uv}/install.sh -o uv-install.sh;`,
      `env UV_INSTALL_DIR=${PREFIX}/bin UV_NO_MODIFY_PATH=1 sh uv-install.sh;`,
      `export UV_PYTHON_INSTALL_DIR=${PREFIX}/python;`,
      `uv python install ${python};`,
      `ln -sf "$(uv python find ${python})" ${PREFIX}/bin/python3;`,
      `npm install -g --prefix ${PREFIX}/npm-global opencode-ai@${opencode} agent-browser@${agentBrowser};`,
      `ln -sf ${PREFIX}/npm-global/bin/opencode ${PREFIX}/bin/opencode;`,
      'curl -fsSL https://bun.sh/install -o bun-install.sh;',
      `env BUN_INSTALL=${PREFIX}/bun bash bun-install.sh bun-v${bun};`,
      `ln -sf ${PREFIX}/bun/bin/bun ${PREFIX}/bin/bun;`,
      `PLAYWRIGHT_BROWSERS_PATH=${PREFIX}/browsers ${PREFIX}/npm-global/bin/agent-browser install --with-deps;`,
      ...agentBrowserWrapper,
      `chmod 755 ${PREFIX}/bin/agent-browser ${AGENT_BINARY} ${CLI_BINARY} ${ENTRYPOINT_BINARY};`,
      ...ownerStatements.map((statement) => `${statement};`),
      'cd /; rm -rf "$tmp"',
    ]),
    packaged ? `ENV PATH=\${PATH}:${PREFIX}/bin` : `ENV PATH="\${PATH}:${PREFIX}/bin"`,
    ...closing,
  ];
  return { ok: true, dockerfile: `${text}\n${layer.join('\n')}\n`, finalStage, warnings };
}
