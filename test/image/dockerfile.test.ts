import { DockerfileParser, type Instruction } from 'dockerfile-ast';
import { describe, expect, test } from 'vitest';
import { composeSandboxDockerfile, type ComposeSandboxDockerfileResult } from '../../image/dockerfile';
import { parseDockerfile } from '../../image/dockerfile-parser';

const options = { runtimeVersion: '1.4.2' };

function composed(result: ComposeSandboxDockerfileResult): string {
  if (!result.ok) throw new Error(`composition failed: ${result.error}`);
  return result.dockerfile;
}

function instructions(text: string): Array<{ keyword: string; args: string }> {
  return DockerfileParser.parse(text)
    .getInstructions()
    .map((instruction: Instruction) => ({
      keyword: instruction.getKeyword(),
      // The raw text (flags included) minus the keyword, continuations joined.
      args: instruction
        .getTextContent()
        .slice(instruction.getInstruction().length)
        .replace(/\\\n/g, ' ')
        .replace(/\s+/g, ' ')
        .trim(),
    }));
}

function afterLastFrom(text: string): Array<{ keyword: string; args: string }> {
  const all = instructions(text);
  const last = all.map((instruction) => instruction.keyword).lastIndexOf('FROM');
  return all.slice(last + 1);
}

describe('composeSandboxDockerfile', () => {
  test('no Dockerfile builds on ubuntu:24.04 with the whole runtime layer', () => {
    const text = composed(composeSandboxDockerfile(null, options));
    const all = instructions(text);
    expect(all[0]).toEqual({ keyword: 'FROM', args: 'ubuntu:24.04' });
    expect(all.filter((instruction) => instruction.keyword === 'FROM')).toHaveLength(1);
    const keywords = all.map((instruction) => instruction.keyword);
    expect(keywords.slice(-6)).toEqual(['ENV', 'ENV', 'WORKDIR', 'EXPOSE', 'ENTRYPOINT', 'CMD']);
    expect(all).toContainEqual({ keyword: 'ENV', args: 'SINGULACOMP_WORKSPACE=/workspace' });
    expect(all).toContainEqual({ keyword: 'WORKDIR', args: '/workspace' });
    expect(all).toContainEqual({ keyword: 'EXPOSE', args: '8000' });
    expect(all).toContainEqual({ keyword: 'ENTRYPOINT', args: '["/usr/local/bin/singulacomp-entrypoint"]' });
    expect(all).toContainEqual({
      keyword: 'COPY',
      args: '--from=ghcr.io/singulacomp/runtime:1.4.2 /usr/local/bin/singulacomp-agent /usr/local/bin/singulacomp /usr/local/bin/singulacomp-entrypoint /usr/local/bin/',
    });
  });

  test('the runtime layer installs the package floor and every tool the spec lists', () => {
    const runs = instructions(composed(composeSandboxDockerfile(null, options)))
      .filter((instruction) => instruction.keyword === 'RUN')
      .map((instruction) => instruction.args)
      .join('\n');
    for (const needle of [
      ' git ',
      ' curl ',
      ' build-essential ',
      ' ffmpeg ',
      ' tmux ',
      'libreoffice-writer',
      'pandoc',
      'tesseract-ocr',
      'get.pnpm.io/install.sh',
      'pnpm env use --global 22',
      'astral.sh/uv/',
      'uv python install 3.12',
      'opencode-ai@1.18.33',
      'bun.sh/install',
      'agent-browser@',
      'agent-browser install --with-deps',
    ]) {
      expect(runs).toContain(needle);
    }
  });

  test('PATH is extended at its end, never replaced', () => {
    const envs = instructions(
      composed(composeSandboxDockerfile('FROM node:22\nENV PATH=/opt/mytools/bin:$PATH\n', options)),
    ).filter((instruction) => instruction.keyword === 'ENV' && instruction.args.startsWith('PATH='));
    expect(envs).toEqual([
      { keyword: 'ENV', args: 'PATH=/opt/mytools/bin:$PATH' },
      // biome-ignore lint/suspicious/noTemplateCurlyInString: a Dockerfile variable, not a JS one
      { keyword: 'ENV', args: 'PATH="${PATH}:/opt/singulacomp/bin"' },
    ]);
  });

  test('the user’s Dockerfile is kept verbatim in front of the layer', () => {
    const user =
      'FROM python:3.12\n# my comment\nRUN pip install \\\n    numpy \\\n    pandas\nCOPY . /src\n';
    const text = composed(composeSandboxDockerfile(user, options));
    expect(text.startsWith(user)).toBe(true);
    expect(instructions(text).slice(0, 3)).toEqual([
      { keyword: 'FROM', args: 'python:3.12' },
      { keyword: 'RUN', args: 'pip install numpy pandas' },
      { keyword: 'COPY', args: '. /src' },
    ]);
  });

  test('in a multi-stage Dockerfile the layer joins the final stage only', () => {
    const user = [
      'FROM golang:1.23 AS build',
      'USER builder',
      'RUN go build -o /out/app .',
      '',
      'FROM debian:bookworm-slim AS final',
      'COPY --from=build /out/app /usr/local/bin/app',
      '',
    ].join('\n');
    const result = composeSandboxDockerfile(user, options);
    expect(result.ok && result.finalStage).toEqual({
      index: 1,
      baseImage: 'debian:bookworm-slim',
      name: 'final',
      user: null,
    });
    const text = composed(result);
    const froms = instructions(text).filter((instruction) => instruction.keyword === 'FROM');
    expect(froms.map((from) => from.args)).toEqual(['golang:1.23 AS build', 'debian:bookworm-slim AS final']);
    const final = afterLastFrom(text);
    expect(final[0]).toEqual({ keyword: 'COPY', args: '--from=build /out/app /usr/local/bin/app' });
    // USER builder belongs to the first stage: the final stage is never switched back to it.
    expect(final.filter((instruction) => instruction.keyword === 'USER')).toEqual([
      { keyword: 'USER', args: 'root' },
    ]);
    expect(final.at(-2)).toEqual({
      keyword: 'ENTRYPOINT',
      args: '["/usr/local/bin/singulacomp-entrypoint"]',
    });
  });

  test('a final stage that switched USER gets root for the layer and its user back afterwards', () => {
    const text = composed(composeSandboxDockerfile('FROM node:22\nUSER node\nRUN npm i -g tsx\n', options));
    const final = afterLastFrom(text);
    const users = final
      .filter((instruction) => instruction.keyword === 'USER')
      .map((instruction) => instruction.args);
    expect(users).toEqual(['node', 'root', 'node']);
    const rootIndex = final.findIndex(
      (instruction) => instruction.keyword === 'USER' && instruction.args === 'root',
    );
    const firstLayerRun = final.findIndex((instruction, i) => i > rootIndex && instruction.keyword === 'RUN');
    expect(firstLayerRun).toBeGreaterThan(rootIndex);
    expect(final.at(-3)).toEqual({ keyword: 'USER', args: 'node' });
    expect(final.map((instruction) => instruction.args).join('\n')).toContain(
      'chown node /workspace /opt/singulacomp/home',
    );
  });

  test('a final stage that ends as root is not switched back', () => {
    const final = afterLastFrom(
      composed(composeSandboxDockerfile('FROM node:22\nUSER node\nUSER 0\n', options)),
    );
    const users = final
      .filter((instruction) => instruction.keyword === 'USER')
      .map((instruction) => instruction.args);
    expect(users).toEqual(['node', '0', 'root']);
  });

  test('the syntax directive stays on the first line', () => {
    const text = composed(
      composeSandboxDockerfile('# syntax=docker/dockerfile:1.7\nFROM alpine:3\n', options),
    );
    expect(text.split('\n')[0]).toBe('# syntax=docker/dockerfile:1.7');
    const directives = DockerfileParser.parse(text).getDirectives();
    expect(directives.map((directive) => [directive.getName(), directive.getValue()])).toEqual([
      ['syntax', 'docker/dockerfile:1.7'],
    ]);
  });

  test('CRLF input and a BOM come out as LF with the same instructions', () => {
    const lf = 'FROM ubuntu:24.04\nRUN apt-get update && \\\n  apt-get install -y jq\n';
    const crlf = `\uFEFF${lf.replace(/\n/g, '\r\n')}`;
    const fromCrlf = composed(composeSandboxDockerfile(crlf, options));
    expect(fromCrlf).toBe(composed(composeSandboxDockerfile(lf, options)));
    expect(fromCrlf).not.toContain('\r');
  });

  test('composition is deterministic: the same input gives the same bytes', () => {
    const user = 'FROM node:22 AS base\nUSER node\n';
    const first = composed(composeSandboxDockerfile(user, options));
    expect(composed(composeSandboxDockerfile(user, { ...options }))).toBe(first);
    expect(composed(composeSandboxDockerfile(user, { runtimeVersion: '1.4.3' }))).not.toBe(first);
  });

  test('a Dockerfile ending in a dangling continuation does not swallow the layer', () => {
    const result = composeSandboxDockerfile('FROM ubuntu:24.04\nRUN echo hi \\\n', options);
    expect(result.ok && result.warnings).toEqual([
      'the Dockerfile ended inside a line continuation; the trailing escape character was removed',
    ]);
    const final = afterLastFrom(composed(result));
    expect(final[0]).toEqual({ keyword: 'RUN', args: 'echo hi' });
    expect(final[1]).toEqual({ keyword: 'USER', args: 'root' });
  });

  test('with the backtick escape directive the layer continues its lines with backticks', () => {
    const text = composed(composeSandboxDockerfile('# escape=`\nFROM ubuntu:24.04\n', options));
    const layerRuns = text.split('\n').filter((line) => line.endsWith(' \\'));
    expect(layerRuns).toEqual([]);
    const ours = parseDockerfile(text).instructions.filter((instruction) => instruction.keyword === 'RUN');
    expect(ours).toHaveLength(2);
    expect(ours[0]?.args).toContain('apt-get install -y --no-install-recommends ca-certificates git curl');
    expect(ours[0]!.endLine - ours[0]!.startLine).toBeGreaterThan(3);
  });

  test('heredocs in the user’s Dockerfile are kept intact', () => {
    const user = 'FROM ubuntu:24.04\nRUN <<EOF\nFROM is not an instruction here\nUSER nobody\nEOF\n';
    const result = composeSandboxDockerfile(user, options);
    expect(result.ok && result.finalStage.user).toBeNull();
    expect(composed(result).startsWith(user)).toBe(true);
  });

  test('<< inside quotes or a here-string is not a heredoc', () => {
    const user = 'FROM ubuntu:24.04\nRUN echo "a<<b" \'c<<d\' && cat <<< "$x"\nUSER app\n';
    const result = composeSandboxDockerfile(user, options);
    expect(result.ok && result.finalStage.user).toBe('app');
  });

  test('the layer resets SHELL to POSIX sh after a user SHELL', () => {
    const final = afterLastFrom(
      composed(
        composeSandboxDockerfile('FROM ubuntu:24.04\nSHELL ["/bin/bash", "-o", "pipefail", "-c"]\n', options),
      ),
    );
    const shells = final
      .filter((instruction) => instruction.keyword === 'SHELL')
      .map((instruction) => instruction.args);
    expect(shells).toEqual(['["/bin/bash", "-o", "pipefail", "-c"]', '["/bin/sh", "-c"]']);
    const firstRun = final.findIndex((instruction) => instruction.keyword === 'RUN');
    expect(final[firstRun - 1]).toEqual({ keyword: 'SHELL', args: '["/bin/sh", "-c"]' });
  });

  test('an unterminated heredoc is refused with a fix', () => {
    expect(composeSandboxDockerfile('FROM ubuntu:24.04\nRUN <<EOF\necho\n', options)).toEqual({
      ok: false,
      error: 'the heredoc <<EOF is never closed; add a line containing only EOF',
    });
  });

  test('a Dockerfile without FROM is refused with a fix', () => {
    expect(composeSandboxDockerfile('# nothing\nRUN echo\n', options)).toEqual({
      ok: false,
      error: 'the Dockerfile has no FROM instruction; start it with e.g. FROM ubuntu:24.04',
    });
  });

  test('a runtime version that could inject instructions is rejected', () => {
    expect(() => composeSandboxDockerfile(null, { runtimeVersion: '1\nRUN curl evil' })).toThrow(TypeError);
  });
});

describe("composeSandboxDockerfile with runtimeSource 'package'", () => {
  const pkg = { runtimeVersion: '1.4.2', runtimeSource: 'package' as const };
  const SHA = '0123456789abcdef'.repeat(4);

  function keywords(text: string): string[] {
    return instructions(text).map((instruction) => instruction.keyword);
  }

  test('the output is single-stage with no COPY --from, and keeps the rest of the layer', () => {
    const text = composed(composeSandboxDockerfile(null, pkg));
    const all = instructions(text);
    expect(all.filter((instruction) => instruction.keyword === 'FROM')).toEqual([
      { keyword: 'FROM', args: 'ubuntu:24.04' },
    ]);
    expect(all.filter((instruction) => /--from/i.test(instruction.args))).toEqual([]);
    expect(all.filter((instruction) => ['COPY', 'ADD'].includes(instruction.keyword))).toEqual([]);
    // Docker's default shell is already sh: no SHELL without a user SHELL (E2B ignores SHELL).
    expect(keywords(text)).toEqual([
      'FROM',
      'USER',
      'RUN',
      'RUN',
      'RUN',
      'ENV',
      'ENV',
      'WORKDIR',
      'EXPOSE',
      'ENTRYPOINT',
      'CMD',
    ]);
    expect(all).toContainEqual({ keyword: 'ENV', args: 'SINGULACOMP_WORKSPACE=/workspace' });
    expect(all).toContainEqual({ keyword: 'WORKDIR', args: '/workspace' });
    expect(all).toContainEqual({ keyword: 'EXPOSE', args: '8000' });
    expect(all).toContainEqual({ keyword: 'ENTRYPOINT', args: '["/usr/local/bin/singulacomp-entrypoint"]' });
    const runs = all
      .filter((instruction) => instruction.keyword === 'RUN')
      .map((instruction) => instruction.args);
    // The package floor comes first (it brings curl), then the runtime, then the tools.
    expect(runs[0]).toContain('apt-get install -y --no-install-recommends ca-certificates git curl');
    expect(runs[1]).toContain(
      'curl -fsSL --retry 3 -o runtime.tar.gz https://downloads.singulacomp.dev/runtime/singulacomp-runtime-1.4.2-linux-x64.tar.gz;',
    );
    expect(runs[1]).toContain(
      'cp unpacked/bin/singulacomp-agent unpacked/bin/singulacomp unpacked/bin/singulacomp-entrypoint /usr/local/bin/;',
    );
    expect(runs[1]).toContain('cp -R unpacked/runtime/. /opt/singulacomp/runtime/;');
    for (const needle of [
      'opencode-ai@1.18.33',
      'uv python install 3.12',
      'agent-browser install --with-deps',
    ]) {
      expect(runs[2]).toContain(needle);
    }
    // E2B's Dockerfile reader drops backslashes inside RUN: the package layer has none to lose.
    expect(runs.join('\n')).not.toContain('\\');
  });

  test('the tarball is verified against the published checksum, or against a pinned one', () => {
    const runtimeRun = (text: string) =>
      instructions(text).filter((instruction) => instruction.keyword === 'RUN')[1]?.args ?? '';
    const published = runtimeRun(composed(composeSandboxDockerfile(null, pkg)));
    expect(published).toContain(
      'curl -fsSL --retry 3 -o runtime.tar.gz.sha256 https://downloads.singulacomp.dev/runtime/singulacomp-runtime-1.4.2-linux-x64.tar.gz.sha256;',
    );
    expect(published).toContain(`actual="$(sha256sum runtime.tar.gz | cut -d ' ' -f 1)";`);
    expect(published).toContain('if [ "$actual" != "$expected" ]; then');
    expect(published).toMatch(/exit 1; fi; mkdir -p unpacked/);

    const pinned = runtimeRun(
      composed(
        composeSandboxDockerfile(null, {
          ...pkg,
          runtimeSha256: SHA,
          runtimeBaseUrl: 'https://mirror.example.com/sc/',
        }),
      ),
    );
    expect(pinned).toContain(`expected=${SHA};`);
    expect(pinned).not.toContain('.sha256');
    expect(pinned).toContain('https://mirror.example.com/sc/singulacomp-runtime-1.4.2-linux-x64.tar.gz;');
  });

  test('PATH is extended at its end without quotes, and a user SHELL is still reset', () => {
    const text = composed(
      composeSandboxDockerfile(
        'FROM node:22\nENV PATH=/opt/mytools/bin:$PATH\nSHELL ["/bin/bash", "-c"]\n',
        pkg,
      ),
    );
    const final = afterLastFrom(text);
    expect(
      final.filter((instruction) => instruction.keyword === 'ENV' && instruction.args.startsWith('PATH=')),
    ).toEqual([
      { keyword: 'ENV', args: 'PATH=/opt/mytools/bin:$PATH' },
      // biome-ignore lint/suspicious/noTemplateCurlyInString: a Dockerfile variable, not a JS one
      { keyword: 'ENV', args: 'PATH=${PATH}:/opt/singulacomp/bin' },
    ]);
    expect(final.filter((instruction) => instruction.keyword === 'SHELL').map((i) => i.args)).toEqual([
      '["/bin/bash", "-c"]',
      '["/bin/sh", "-c"]',
    ]);
  });

  test('a final stage that switched USER gets it back after the layer', () => {
    const result = composeSandboxDockerfile('FROM node:22\nUSER node\nRUN npm i -g tsx\n', pkg);
    const final = afterLastFrom(composed(result));
    expect(final.filter((instruction) => instruction.keyword === 'USER').map((i) => i.args)).toEqual([
      'node',
      'root',
      'node',
    ]);
    expect(final.at(-3)).toEqual({ keyword: 'USER', args: 'node' });
    expect(
      final.filter((i) => i.keyword === 'RUN').some((i) => i.args.includes('chown node /workspace')),
    ).toBe(true);
  });

  test('composition is deterministic and differs from the image source', () => {
    const user = 'FROM debian:bookworm\nRUN echo hi\n';
    const a = composed(composeSandboxDockerfile(user, pkg));
    const b = composed(composeSandboxDockerfile(user, { ...pkg }));
    expect(a).toBe(b);
    expect(a.startsWith(user)).toBe(true);
    expect(a).not.toBe(composed(composeSandboxDockerfile(user, options)));
  });

  test('a base URL or digest that could inject shell is rejected', () => {
    expect(() =>
      composeSandboxDockerfile(null, { ...pkg, runtimeBaseUrl: 'https://x.example/a;curl evil' }),
    ).toThrow(TypeError);
    expect(() => composeSandboxDockerfile(null, { ...pkg, runtimeBaseUrl: 'file:///etc' })).toThrow(
      TypeError,
    );
    expect(() => composeSandboxDockerfile(null, { ...pkg, runtimeSha256: 'abc' })).toThrow(TypeError);
  });
});

describe('composeSandboxDockerfile without the package floor', () => {
  const compose = (user: string | null) =>
    composeSandboxDockerfile(user, {
      runtimeVersion: '1.2.3',
      packageFloor: false,
      runtimeImage: 'localhost/singulacomp-runtime',
    });

  test('copies the runtime and its tools from the runtime image and downloads nothing', () => {
    const result = compose('FROM debian:bookworm\nUSER app\n');
    if (!result.ok) throw new Error(result.error);
    const layer = result.dockerfile.slice(result.dockerfile.indexOf('# ---- SingulaComp runtime layer'));
    expect(layer).toContain('(no package floor)');
    expect(layer).toContain(
      'COPY --from=localhost/singulacomp-runtime:1.2.3 /opt/singulacomp/runtime/ /opt/singulacomp/runtime/',
    );
    expect(layer).toContain(
      'COPY --from=localhost/singulacomp-runtime:1.2.3 /opt/singulacomp/bin/ /opt/singulacomp/bin/',
    );
    expect(layer).not.toMatch(/apt-get|dnf|curl|npm install/);
    expect(layer).toContain('chown app /workspace /opt/singulacomp/home;');
    const lines = layer.trimEnd().split('\n');
    expect(lines.slice(-3)).toEqual([
      'USER app',
      'ENTRYPOINT ["/usr/local/bin/singulacomp-entrypoint"]',
      'CMD []',
    ]);
    expect(layer).toContain(`ENV PATH="${'$'}{PATH}:/opt/singulacomp/bin"`);
  });

  test('is deterministic, and needs the image runtime source', () => {
    expect(compose(null)).toEqual(compose(null));
    expect(() =>
      composeSandboxDockerfile(null, { runtimeVersion: '1', runtimeSource: 'package', packageFloor: false }),
    ).toThrow(/packageFloor false needs the image runtime source/);
  });
});

describe('parseDockerfile', () => {
  test('continuations, comments inside them and keywords are read like BuildKit does', () => {
    const parsed = parseDockerfile('from a as b\nRUN x \\\n# note\n\n  y\ncopy  --chown=1 ["a b", "c"]\n');
    expect(
      parsed.instructions.map(({ keyword, args, startLine, endLine }) => ({
        keyword,
        args,
        startLine,
        endLine,
      })),
    ).toEqual([
      { keyword: 'FROM', args: 'a as b', startLine: 1, endLine: 1 },
      { keyword: 'RUN', args: 'x   y', startLine: 2, endLine: 5 },
      { keyword: 'COPY', args: '--chown=1 ["a b", "c"]', startLine: 6, endLine: 6 },
    ]);
  });
});
