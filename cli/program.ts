// The `singulacomp` command tree (R-CLI-1). Commands are thin: read options, call the API, print.
import { Command } from 'commander';
import { readCliEnv } from './env';
import { gitCredential } from './git-credential';

export function buildProgram(): Command {
  const program = new Command('singulacomp').description('SingulaComp control plane CLI');
  program
    .command('git-credential')
    .description('git credential helper: hands SINGULACOMP_TOKEN to the SingulaComp git proxy only')
    .argument('<operation>', 'get, store or erase')
    .action(async (operation: string) => {
      const env = readCliEnv();
      await gitCredential(operation, { apiUrl: env.apiUrl, token: env.token });
    });
  return program;
}
