#!/usr/bin/env node
// singulacomp-agent: the in-sandbox daemon. Environment per docs/agent-api.md; host-only flags
// --workspace, --home, --opencode-port, --opencode-bin.
import { createAgent } from './agent';
import { AgentConfigError, parseAgentEnv } from './env';
import { createLogger } from './logger';

/** Exit status of a daemon that stopped itself because the API stayed unreachable. */
const CONTROL_PLANE_LOST = 3;

async function main(): Promise<void> {
  let env: ReturnType<typeof parseAgentEnv>;
  try {
    env = parseAgentEnv(process.env, process.argv.slice(2));
  } catch (error) {
    if (error instanceof AgentConfigError) {
      process.stderr.write(`${error.message}\n`);
      process.exit(2);
    }
    throw error;
  }
  const logger = createLogger(env.logLevel);
  // Stopped for want of the control plane: exit (the entrypoint and the sandbox end with us).
  const agent = createAgent({ ...env, logger, onControlPlaneLost: () => process.exit(CONTROL_PLANE_LOST) });
  let signals = 0;
  const onSignal = (signal: NodeJS.Signals): void => {
    signals += 1;
    if (signals > 1) {
      logger.warn({ signal }, 'second signal; exiting now');
      process.exit(1);
    }
    logger.info({ signal }, 'stopping');
    void agent.stop().then(() => process.exit(0));
  };
  process.on('SIGTERM', onSignal);
  process.on('SIGINT', onSignal);
  await agent.start();
}

main().catch((error: unknown) => {
  process.stderr.write(`singulacomp-agent failed: ${(error as Error).stack ?? String(error)}\n`);
  process.exit(1);
});
