// A Node.js older than package.json's engines.node is refused up front: `npm install` stops (npm's
// engine-strict, set in .npmrc) and `npm start` says in one line which version it needs and how to
// get it, before it builds or starts anything. The older Node.js is this one reporting another
// version (a preload rewrites process.version), so the test needs no second Node.js installed.
import { execFile } from 'node:child_process';
import {
  copyFileSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readFileSync,
  rmSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, describe, expect, test } from 'vitest';
import { nodeFloor, nodeVersionProblem } from '../../scripts/node-version.mjs';
import { testRunEnv } from '../support/test-run';

const run = promisify(execFile);
const ROOT = new URL('../..', import.meta.url).pathname;
const scratch = mkdtempSync(join(tmpdir(), 'sc-node-version-'));
const pkg = JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as { engines: { node: string } };

/** A preload making this Node.js report `version`. */
function pretend(version: string): string {
  const file = join(scratch, `node-${version}.mjs`);
  writeFileSync(
    file,
    `Object.defineProperty(process, 'version', { value: 'v${version}' });
Object.defineProperty(process, 'versions', { value: { ...process.versions, node: '${version}' } });
`,
  );
  return file;
}

async function exec(file: string, args: string[], options: { cwd: string; env: NodeJS.ProcessEnv }) {
  try {
    const { stdout, stderr } = await run(file, args, options);
    return { code: 0, stdout, stderr };
  } catch (error) {
    const failed = error as { code: number; stdout: string; stderr: string };
    return { code: failed.code, stdout: failed.stdout, stderr: failed.stderr };
  }
}

afterAll(() => rmSync(scratch, { recursive: true, force: true }));

describe('an older Node.js', () => {
  test('the floor is package.json engines.node, and the README says the same', () => {
    const floor = nodeFloor();
    expect(pkg.engines.node).toBe(`>=${floor.major}.${floor.minor}`);
    expect(readFileSync(join(ROOT, 'README.md'), 'utf8')).toContain(
      `Node.js ≥ ${floor.major}.${floor.minor}`,
    );
    expect(nodeVersionProblem(`${floor.major}.${floor.minor}.0`)).toBeNull();
    expect(nodeVersionProblem('24.0.0')).toBeNull();
    expect(nodeVersionProblem(`${floor.major}.${floor.minor - 1}.9`)).toMatch(/needs Node\.js/);
  });

  test('npm start refuses in one line naming both versions and how to upgrade, and starts nothing', async () => {
    const dataDir = join(scratch, 'data');
    const result = await exec(process.execPath, ['--import', pretend('20.20.2'), 'scripts/start.mjs'], {
      cwd: ROOT,
      env: { PATH: process.env.PATH, SINGULACOMP_DATA_DIR: dataDir, PORT: '0', ...testRunEnv() },
    });
    const { major, minor } = nodeFloor();
    expect(result.code).toBe(1);
    expect(result.stdout).toBe('');
    expect(result.stderr.trim().split('\n')).toEqual([
      `SingulaComp needs Node.js ${major}.${minor} or newer, and this is Node.js 20.20.2: install Node.js 24 LTS (https://nodejs.org/en/download, or \`nvm install 24\`), then run \`npm install\` again.`,
    ]);
    expect(existsSync(dataDir)).toBe(false);
  });

  test("npm install stops on the checkout's engines (engine-strict in .npmrc) and passes at the floor", async () => {
    const project = join(scratch, 'install');
    rmSync(project, { recursive: true, force: true });
    mkdirSync(project);
    // The checkout's .npmrc and engines, without dependencies (nothing to download).
    copyFileSync(join(ROOT, '.npmrc'), join(project, '.npmrc'));
    writeFileSync(
      join(project, 'package.json'),
      JSON.stringify({ name: 'engines-check', version: '1.0.0', private: true, engines: pkg.engines }),
    );
    const npm = (version: string) =>
      exec('npm', ['install', '--no-audit', '--no-fund'], {
        cwd: project,
        env: {
          PATH: process.env.PATH,
          HOME: scratch,
          NODE_OPTIONS: `--import=${pretend(version)}`,
          ...testRunEnv(),
        },
      });
    const old = await npm('20.20.2');
    expect(old.code).not.toBe(0);
    expect(old.stderr).toContain('EBADENGINE');
    expect(old.stderr).toContain(`"node":"${pkg.engines.node}"`);
    expect(old.stderr).toContain('v20.20.2');
    const { major, minor } = nodeFloor();
    const current = await npm(`${major}.${minor}.0`);
    expect(current.stderr).not.toContain('EBADENGINE');
    expect(current.code).toBe(0);
  });
});
