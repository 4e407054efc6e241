// The CLI's credentials: `singulacomp login` stores the API URL and a PAT in <configDir>/config.json
// (mode 0600, directory 0700). SINGULACOMP_API_URL and SINGULACOMP_TOKEN win over the file, which is
// how the CLI runs inside a sandbox.
import { chmod, mkdir, readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import type { CliEnv } from './env';
import { CliExit } from './errors';

export interface StoredConfig {
  apiUrl: string;
  token: string;
}

export interface ResolvedConfig {
  apiUrl: string;
  token: string;
}

export function configPath(env: CliEnv): string {
  return join(env.configDir, 'config.json');
}

export async function readStoredConfig(env: CliEnv): Promise<Partial<StoredConfig>> {
  try {
    const parsed = JSON.parse(await readFile(configPath(env), 'utf8')) as Partial<StoredConfig>;
    return typeof parsed === 'object' && parsed !== null ? parsed : {};
  } catch {
    return {};
  }
}

export async function writeStoredConfig(env: CliEnv, config: StoredConfig): Promise<string> {
  await mkdir(env.configDir, { recursive: true, mode: 0o700 });
  const path = configPath(env);
  await writeFile(path, `${JSON.stringify(config, null, 2)}\n`, { mode: 0o600 });
  // writeFile keeps the mode of an existing file: make sure an older, looser file is tightened too.
  await chmod(path, 0o600);
  return path;
}

/** The API URL and token to use: environment first, then the config file. */
export async function resolveConfig(env: CliEnv): Promise<ResolvedConfig> {
  const stored = await readStoredConfig(env);
  const apiUrl = env.apiUrl ?? stored.apiUrl ?? null;
  const token = env.token ?? stored.token ?? null;
  if (!apiUrl || !token) {
    throw new CliExit(
      'Not logged in: run `singulacomp login` (the local server by default), or set SINGULACOMP_API_URL and SINGULACOMP_TOKEN.',
    );
  }
  return { apiUrl: apiUrl.replace(/\/+$/, ''), token };
}
