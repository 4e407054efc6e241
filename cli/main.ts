// The `singulacomp` CLI entry point (bin in package.json).
import { buildProgram } from './program';

buildProgram()
  .parseAsync(process.argv)
  .catch((error: unknown) => {
    process.stderr.write(`singulacomp: ${(error as Error).message}\n`);
    process.exitCode = 1;
  });
