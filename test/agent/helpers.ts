// vitest `test` extended with a `startAgent` fixture (see harness.ts) that stops everything
// afterwards and prints the session and workspace when the test failed, and a file-scoped `agent`
// for tests that only read from a running daemon and can share one OpenCode boot.
import { test as base } from 'vitest';
import { startTestAgent, type TestAgent, type TestAgentOptions } from './harness';

export * from './harness';

interface AgentFixtures {
  /** Starts a daemon with its own OpenCode; everything it started is stopped after the test. */
  startAgent: (options?: TestAgentOptions) => Promise<TestAgent>;
  /**
   * One running daemon with default options for the whole file, stopped after its last test. For
   * tests that leave it as they found it: each OpenCode boot costs seconds of CPU.
   */
  agent: TestAgent;
}

export const test = base.extend<AgentFixtures>({
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
  agent: [
    // biome-ignore lint/correctness/noEmptyPattern: vitest fixtures take their dependencies by destructuring
    async ({}, use) => {
      const harness = await startTestAgent({ start: false });
      try {
        await harness.agent.start();
        await use(harness);
      } catch (error) {
        console.error(`agent fixture: session ${harness.sessionId}, workspace ${harness.workspace}`);
        throw error;
      } finally {
        await harness.stop();
      }
    },
    { scope: 'file' },
  ],
});

export { expect } from 'vitest';
