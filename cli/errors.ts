// Failures the CLI reports in one line (cli/main.ts prints the message, never a stack).

/** Thrown to end the command with a message and exit code 1 (a refused confirmation, a failed reload). */
export class CliExit extends Error {
  constructor(
    message: string,
    readonly exitCode = 1,
  ) {
    super(message);
  }
}
