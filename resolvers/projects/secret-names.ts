// Environment variable names a runtime secret may not take: each changes how a process in the
// sandbox is loaded or what it runs, so whoever can write a secret (`secrets:write`) could otherwise
// run code in the next session's daemon, or on the host for an unisolated LOCAL sandbox. Compared
// case-insensitively (npm reads npm_config_*, most tools upper case). The SINGULACOMP_ prefix is
// reserved separately for platform variables.

/** Exact names, each with why it is refused. */
const EXACT: Record<string, string> = {
  PATH: 'decides which binaries run',
  HOME: 'decides which startup and config files are read',
  SHELL: 'decides which shell runs commands',
  BASH_ENV: 'a file bash executes on start',
  ENV: 'a file sh executes on start',
  IFS: 'changes how shells split words',
  PS4: 'bash evaluates it when tracing',
  PROMPT_COMMAND: 'bash runs it before each prompt',
  CDPATH: 'changes what shell scripts cd into',
  NODE_OPTIONS: 'Node flags such as --require/--import run code in every Node process',
  NODE_PATH: 'decides which modules Node loads',
  NODE_EXTRA_CA_CERTS: 'adds trusted certificate authorities (TLS interception)',
  SSL_CERT_FILE: 'replaces the trusted certificate authorities',
  SSL_CERT_DIR: 'replaces the trusted certificate authorities',
  JAVA_TOOL_OPTIONS: 'JVM flags such as -javaagent run code',
  _JAVA_OPTIONS: 'JVM flags such as -javaagent run code',
  JDK_JAVA_OPTIONS: 'JVM flags such as -javaagent run code',
  PERL5OPT: 'Perl flags such as -M run code',
  PERL5LIB: 'decides which modules Perl loads',
  PERLLIB: 'decides which modules Perl loads',
  RUBYOPT: 'Ruby flags such as -r run code',
  RUBYLIB: 'decides which libraries Ruby loads',
  GCONV_PATH: 'glibc loads conversion modules from it',
  LOCPATH: 'glibc loads locale data from it',
  HOSTALIASES: 'redirects host name resolution',
  XDG_CONFIG_HOME: 'decides which config files are read',
  XDG_DATA_HOME: 'decides which data files (plugins) are read',
  TMPDIR: 'decides where temporary files (and sockets) go',
};

/** Prefixes, each with why every name under it is refused. */
const PREFIXES: Array<[string, string]> = [
  ['LD_', 'the dynamic loader (LD_PRELOAD, LD_LIBRARY_PATH, LD_AUDIT) loads code from it'],
  ['DYLD_', 'the macOS dynamic loader loads code from it'],
  ['PYTHON', 'Python runs or imports code from it (PYTHONSTARTUP, PYTHONPATH, PYTHONHOME)'],
  ['GIT_', 'git runs commands from it (GIT_SSH_COMMAND, GIT_EXEC_PATH, GIT_CONFIG_*)'],
  ['OPENCODE_', 'configures the agent runtime itself (config files, permissions, server)'],
  ['NPM_CONFIG_', 'npm settings such as script-shell and node-options run code'],
  ['BUN_', 'configures the Bun runtime the agent may use'],
  ['SINGULACOMP_', 'reserved for platform variables'],
];

/** Why `name` cannot be a secret's name, or null when it can. */
export function reservedSecretName(name: string): string | null {
  const upper = name.toUpperCase();
  const exact = EXACT[upper];
  if (exact) return `${upper} ${exact}`;
  for (const [prefix, why] of PREFIXES) if (upper.startsWith(prefix)) return `${prefix}* ${why}`;
  return null;
}

/** Every refused exact name and prefix (documentation and tests). */
export const RESERVED_SECRET_NAMES = {
  exact: Object.keys(EXACT),
  prefixes: PREFIXES.map(([p]) => p),
};
