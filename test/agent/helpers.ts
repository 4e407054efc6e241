// vitest `test` extended with a `startAgent` fixture (see harness.ts) that stops everything
// afterwards and prints the session and workspace when the test failed.
import { test as base } from 'vitest';
import { startTestAgent, type TestAgent, type TestAgentOptions } from './harness';

export * from './harness';

/** vitest `test` with a `startAgent` fixture that always cleans up. */
export const test = base.extend<{ startAgent: (options?: TestAgentOptions) => Promise<TestAgent> }>({
  startAgent: async ({ onTestFailed }, use) => {
    const started: TestAgent[] = [];
    onTestFailed(() => {
      for (const harness of started) {
        console.error(`agent test failed: session ${harness.sessionId}, workspace ${harness.workspace}`);
      }
    });
    try {
      await use(async (options) => {
        // Registered before OpenCode boots: a test that times out while the agent is still
        // starting must not leave its `opencode serve` behind when this fixture cleans up.
        const harness = await startTestAgent({ ...options, start: false });
        started.push(harness);
        if (options?.start !== false) await harness.agent.start();
        return harness;
      });
    } finally {
      for (const harness of started) await harness.stop();
    }
  },
});

export { expect } from 'vitest';
