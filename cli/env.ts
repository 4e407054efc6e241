// The CLI's settings from its environment; nothing else in cli/ reads process.env.
export interface CliEnv {
  /** SINGULACOMP_API_URL: wins over the config file. */
  apiUrl: string | null;
  /** SINGULACOMP_TOKEN: wins over the config file (inside a sandbox, the session's token). */
  token: string | null;
  /** Directory of config.json: SINGULACOMP_CONFIG_DIR, else $XDG_CONFIG_HOME/singulacomp, else ~/.config/singulacomp. */
  configDir: string;
  /** Inside a sandbox (SINGULACOMP_SESSION_ID set). */
  sessionId: string | null;
}

export function readCliEnv(source: NodeJS.ProcessEnv = process.env): CliEnv {
  const home = source.HOME ?? '/root';
  const nonEmpty = (value: string | undefined) => (value && value.length > 0 ? value : null);
  return {
    apiUrl: nonEmpty(source.SINGULACOMP_API_URL),
    token: nonEmpty(source.SINGULACOMP_TOKEN),
    configDir:
      nonEmpty(source.SINGULACOMP_CONFIG_DIR) ??
      `${nonEmpty(source.XDG_CONFIG_HOME) ?? `${home}/.config`}/singulacomp`,
    sessionId: nonEmpty(source.SINGULACOMP_SESSION_ID),
  };
}
