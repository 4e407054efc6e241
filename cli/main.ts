// The `singulacomp` CLI entry point (bin in package.json). Failures print one line and exit 1.
import { ApiError } from './client';
import { CliExit, buildProgram } from './program';

buildProgram()
  .parseAsync(process.argv)
  .catch((error: unknown) => {
    const known = error instanceof CliExit || error instanceof ApiError;
    process.stderr.write(
      `singulacomp: ${known ? (error as Error).message : String((error as Error)?.stack ?? error)}\n`,
    );
    process.exitCode = error instanceof CliExit ? error.exitCode : 1;
  });
