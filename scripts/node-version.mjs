// The Node.js floor, read from package.json's engines (the one place it is written): `npm install`
// refuses an older Node.js through .npmrc's engine-strict, and `npm start` through this check before
// it builds or starts anything. Plain JavaScript that any Node.js can parse.
import { readFileSync } from 'node:fs';

/** The `>=major.minor` of package.json's engines.node. */
export function nodeFloor() {
  const pkg = JSON.parse(readFileSync(new URL('../package.json', import.meta.url), 'utf8'));
  const match = /^>=\s*(\d+)\.(\d+)/.exec(pkg.engines?.node ?? '');
  if (!match) throw new Error(`package.json engines.node is not ">=major.minor": ${pkg.engines?.node}`);
  return { major: Number(match[1]), minor: Number(match[2]) };
}

/** One line saying why `version` (e.g. "20.20.2") cannot run this, or null when it can. */
export function nodeVersionProblem(version, floor = nodeFloor()) {
  const [major = 0, minor = 0] = version.split('.').map(Number);
  if (major > floor.major || (major === floor.major && minor >= floor.minor)) return null;
  return `SingulaComp needs Node.js ${floor.major}.${floor.minor} or newer, and this is Node.js ${version}: install Node.js 24 LTS (https://nodejs.org/en/download, or \`nvm install 24\`), then run \`npm install\` again.`;
}
