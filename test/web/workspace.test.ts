// The session page's workspace and project onboarding in Debian's Chromium, against a real server on
// LOCAL with the real daemon, real OpenCode and the stub model: a turn that runs a tool shows the
// tool block with its output; the terminal runs a shell in the sandbox over OpenCode's PTY API, and
// a server started there appears in the preview's port picker and opens; a port nothing listens on
// is explained; after Stop the conversation and the branch's diff still show. Projects are created,
// edited, re-synced and deleted through the forms, and the empty list leads to the form.
// Screenshots go to .tmp/web/.
import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import type { Browser, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import type { StubModelRequest } from '../fixtures/stub-model';
import { createProject } from '../leases/helpers';
import { waitFor } from '../support/wait';
import { E2E_SETUP_TIMEOUT_MS, type E2e, startE2e } from '../e2e/helpers';
import { type WatchedPage, launchBrowser, openPage, seriousA11yViolations, summarisePng } from './helpers';

const SHOTS = '.tmp/web';
const NOTES = 'first line\nsecond line\nthird line\n';
/** What the tool runs: writes a file, commits and pushes it (as an agent would), and prints it. */
const COMMAND =
  "printf 'first line\\nsecond line\\nthird line\\n' > notes.txt && git add notes.txt && git -c user.name=Agent -c user.email=agent@example.com commit -qm 'Add notes' && git push -q origin HEAD && cat notes.txt";
const ANSWER = 'I wrote notes.txt and pushed it.';

async function screenshot(page: Page, name: string): Promise<void> {
  mkdirSync(SHOTS, { recursive: true });
  const png = await page.screenshot({ path: join(SHOTS, `${name}.png`), fullPage: true });
  expect(summarisePng(png).colours, `${name}.png colours`).toBeGreaterThan(16);
}

/** The model asks for the bash tool on a turn's first call, and answers in text once it has run. */
function toolThenAnswer(request: StubModelRequest) {
  const ranTool = request.messages.some((m) => (m as { role?: string }).role === 'tool');
  const offersTools = Array.isArray(request.body.tools) && request.body.tools.length > 0;
  if (ranTool || !offersTools) return ANSWER;
  return { tool: 'bash', input: { command: COMMAND, description: 'Write and push notes.txt' } };
}

describe('the session workspace and project onboarding in a real browser', () => {
  let e: E2e;
  let browser: Browser;
  let w: WatchedPage;
  let sessionId: string;

  beforeAll(async () => {
    e = await startE2e({ gateway: true, daemonEnv: { SINGULACOMP_ATTACHMENT_OFFLOAD: '0' } });
    // The project the session form picks.
    await createProject(e.t, e.repo.url);
    browser = await launchBrowser();
    w = await openPage(browser);
  }, E2E_SETUP_TIMEOUT_MS);
  afterAll(async () => {
    await w?.context.close();
    await browser?.close();
    await e?.stop();
  });

  test('the sign-in page says where to find a token', async () => {
    const { page } = w;
    await page.goto(`${e.t.url}/`);
    const hint = page.getByRole('region', { name: 'Where is my token?' });
    await hint.waitFor();
    const text = (await hint.textContent()) ?? '';
    expect(text).toContain('.data/bootstrap-token');
    expect(text).toContain('npm start');
    expect(await seriousA11yViolations(page)).toEqual([]);
    await page.getByLabel('Personal access token').fill(e.t.adminToken);
    await page.getByRole('button', { name: 'Sign in' }).click();
    await page.getByRole('heading', { name: 'Sessions' }).waitFor();
    expect(w.problems).toEqual([]);
  });

  test('a turn that runs a tool shows the tool block with its output', async ({ onTestFailed }) => {
    onTestFailed(async () => {
      const alerts = await w.page.getByRole('alert').allTextContents();
      const messages = await e.t.raw({
        query: `{ session(id: "${sessionId}") { messages(last: 20) { edges { node { role text parts { type tool toolStatus toolError } } } } } }`,
      });
      console.error(
        `stub requests: ${e.stub.requests.length}; alerts: ${JSON.stringify(alerts)}; messages: ${JSON.stringify(messages)}\n${await e.describeSession(sessionId)}`,
      );
    });
    const { page } = w;
    await page.getByRole('button', { name: 'Create session' }).click();
    await page.waitForURL(/\/sessions\/[0-9a-f-]{36}$/);
    sessionId = page.url().split('/').at(-1)!;
    await waitFor(async () => (await page.getByTestId('agent-state').getAttribute('data-ready')) === 'true', {
      timeoutMs: 120_000,
      what: 'the agent to be ready',
    });
    e.stub.setReply(toolThenAnswer);
    await page.getByLabel('Message').fill('Write the notes file.');
    await page.getByRole('button', { name: 'Send' }).click();

    const stored = page.locator(
      'li[data-role="assistant"]:not([data-streaming]) .tool-call[data-tool="bash"]',
    );
    await stored.waitFor({ timeout: 90_000 });
    await waitFor(async () => (await stored.getAttribute('data-status')) === 'completed', {
      timeoutMs: 60_000,
      what: 'the tool block to show completed',
    });
    expect(await stored.locator('.tool-command').textContent()).toBe(`$ ${COMMAND}`);
    expect(await stored.getByTestId('tool-output').textContent()).toBe(NOTES.trimEnd());
    expect(await stored.getByTestId('tool-status').textContent()).toMatch(/^completed · [\d.]+ (ms|s)$/);
    const answer = page.locator('li[data-role="assistant"]:not([data-streaming]) p');
    await waitFor(async () => (await answer.last().textContent({ timeout: 1_000 })) === ANSWER, {
      timeoutMs: 60_000,
      what: 'the answer after the tool',
    });

    // What the page shows is what the API stored.
    const api = (await e.t.raw({
      query: `{ session(id: "${sessionId}") { messages(last: 20) { edges { node { role parts { type tool toolStatus toolOutput } } } } } }`,
    })) as {
      data: {
        session: {
          messages: { edges: { node: { role: string; parts: { type: string; tool: string | null }[] } }[] };
        };
      };
    };
    const parts = api.data.session.messages.edges.flatMap((edge) => edge.node.parts);
    expect(parts.filter((p) => p.type === 'tool')).toEqual([
      { type: 'tool', tool: 'bash', toolStatus: 'completed', toolOutput: NOTES },
    ]);

    // The branch's diff, per file, from the pushed commit.
    await page.getByRole('tab', { name: 'Changes' }).click();
    const diff = page.locator('details.file-diff[data-file="notes.txt"]');
    await waitFor(
      async () => {
        if ((await diff.count()) > 0) return true;
        await page.getByRole('button', { name: 'Refresh' }).first().click();
        return false;
      },
      { timeoutMs: 30_000, what: 'the diff of notes.txt' },
    );
    expect(await diff.getAttribute('data-status')).toBe('ADDED');
    expect(await diff.locator('pre.diff .add').allTextContents()).toEqual([
      '+first line\n',
      '+second line\n',
      '+third line\n',
    ]);
    await screenshot(page, 'session-tool-call');
    expect(await seriousA11yViolations(page)).toEqual([]);
    expect(w.problems).toEqual([]);
  }, 300_000);

  test('Files shows the branch read-only; Logs shows the sandbox log; Telemetry says LOCAL enforces no limits', async () => {
    const { page } = w;
    await page.getByRole('tab', { name: 'Files' }).click();
    const tree = page.getByTestId('tree');
    await tree.locator('[data-entry="notes.txt"]').waitFor();
    await tree.getByRole('button', { name: 'notes.txt' }).click();
    const view = page.getByTestId('file-view');
    await waitFor(async () => (await view.locator('pre').textContent({ timeout: 1_000 })) === NOTES, {
      what: 'the file text',
    });

    await page.getByRole('tab', { name: 'Logs' }).click();
    const log = page.getByTestId('log-tail');
    await log.waitFor({ timeout: 30_000 });
    expect(((await log.textContent()) ?? '').length).toBeGreaterThan(0);

    await page.getByRole('tab', { name: 'Telemetry' }).click();
    const note = page.getByTestId('limits-not-enforced');
    await note.waitFor();
    expect(await note.textContent()).toContain('Limits are not enforced on LOCAL');
    expect(await seriousA11yViolations(page)).toEqual([]);
    expect(w.problems).toEqual([]);
  });

  test('the terminal runs a shell in the sandbox, and a server it starts is offered by the port picker', async () => {
    const { page } = w;
    await page.getByRole('tab', { name: 'Terminal' }).click();
    const state = page.getByTestId('terminal-state');
    await waitFor(async () => (await state.getAttribute('data-state', { timeout: 1_000 })) === 'open', {
      timeoutMs: 30_000,
      what: 'the terminal to connect',
    });
    const terminal = page.getByTestId('terminal');
    await terminal.click();
    await page.keyboard.type('echo sum=$((40+2)) && cat notes.txt');
    await page.keyboard.press('Enter');
    await waitFor(
      async () => {
        const text = (await terminal.textContent()) ?? '';
        return text.includes('sum=42') && text.includes('third line');
      },
      { timeoutMs: 30_000, what: 'the command output in the terminal' },
    );
    await screenshot(page, 'session-terminal');

    // A server started in the terminal belongs to the sandbox: the port picker offers it.
    await page.keyboard.type('python3 -m http.server 8765 --bind 127.0.0.1');
    await page.keyboard.press('Enter');
    await page.getByRole('tab', { name: 'Preview' }).click();
    const port = page.getByTestId('ports').locator('button[data-port="8765"]');
    await port.waitFor({ timeout: 60_000 });
    const api = await e.t.raw({
      query: `{ session(id: "${sessionId}") { sandbox { ports } } }`,
    });
    expect((api.data as { session: { sandbox: { ports: number[] } } }).session.sandbox.ports).toContain(8765);
    await port.click();
    await page.getByRole('button', { name: 'Open preview' }).click();
    const frame = page.frameLocator('iframe[title="Preview of port 8765"]');
    await frame.getByRole('link', { name: 'notes.txt' }).waitFor({ timeout: 60_000 });
    await screenshot(page, 'session-preview-ports');
    expect(w.problems).toEqual([]);
  }, 180_000);

  test('a port nothing listens on is explained with the ports that are, not framed', async () => {
    const { page } = w;
    await page.getByLabel('Port', { exact: true }).fill('9');
    await page.getByRole('button', { name: 'Open preview' }).click();
    const silent = page.getByTestId('nothing-listens');
    await silent.waitFor();
    expect(await silent.textContent()).toContain('Nothing listens on port 9');
    expect(await silent.textContent()).toContain('The sandbox listens on 8765');
    expect(await page.locator('iframe.preview').count()).toBe(0);
    expect(await seriousA11yViolations(page)).toEqual([]);
    expect(w.problems).toEqual([]);
  });

  test('after Stop the conversation (message, tool call with output, answer) and the diff still show', async () => {
    const { page } = w;
    await page.getByRole('button', { name: 'Stop' }).click();
    await waitFor(async () => (await page.getByTestId('session-status').textContent())?.includes('STOPPED'), {
      timeoutMs: 60_000,
      what: 'the header to show STOPPED',
    });
    // A fresh load reads everything back from the control plane: the sandbox is gone.
    await page.reload();
    await page.getByTestId('ended').waitFor();
    const user = page.locator('li[data-role="user"] p');
    await user.first().waitFor();
    expect(await user.allTextContents()).toEqual(['Write the notes file.']);
    const tool = page.locator('li[data-role="assistant"] .tool-call[data-tool="bash"]');
    expect(await tool.getAttribute('data-status')).toBe('completed');
    expect(await tool.getByTestId('tool-output').textContent()).toBe(NOTES.trimEnd());
    expect(await page.locator('li[data-role="assistant"] p').last().textContent()).toBe(ANSWER);
    const diff = page.locator('details.file-diff[data-file="notes.txt"]');
    await diff.waitFor();
    expect(await diff.locator('pre.diff .add').count()).toBe(3);
    expect(await page.getByLabel('Message').count()).toBe(0);
    await page.getByRole('tab', { name: 'Terminal' }).click();
    expect(await page.getByTestId('terminal-state').getAttribute('data-state')).toBe('ended');
    await screenshot(page, 'session-stopped-record');
    expect(await seriousA11yViolations(page)).toEqual([]);
    // 375 px wide: the workspace stacks under the conversation and nothing scrolls sideways.
    await page.setViewportSize({ width: 375, height: 800 });
    const [conversation, workspace] = await Promise.all([
      page.locator('.conversation').boundingBox(),
      page.locator('.workspace').boundingBox(),
    ]);
    expect(workspace!.y).toBeGreaterThan(conversation!.y + conversation!.height - 1);
    expect(await page.evaluate('document.documentElement.scrollWidth')).toBeLessThanOrEqual(375);
    await screenshot(page, 'session-stopped-375px');
    await page.setViewportSize({ width: 1280, height: 900 });
    expect(w.problems).toEqual([]);
  });

  test('an empty project list leads to the form; a project is created, edited, re-synced and deleted', async () => {
    const seeded = await e.t.seedAccount({ tier: 'TEAM' });
    const other = await openPage(browser);
    try {
      const { page } = other;
      await page.goto(`${e.t.url}/`);
      await page.getByLabel('Personal access token').fill(seeded.token);
      await page.getByRole('button', { name: 'Sign in' }).click();
      await page.getByRole('link', { name: 'Projects' }).click();
      const empty = page.getByTestId('no-projects');
      await empty.waitFor();
      await empty.getByRole('link', { name: 'create one with the form below' }).click();
      expect(new URL(page.url()).hash).toBe('#new-project');

      // A repository that does not exist: the API's message and code, the field marked.
      await page.getByLabel('Project name').fill('onboarded');
      await page.getByLabel('Repository URL or local path').fill('/nonexistent/repository');
      await page.getByRole('button', { name: 'Create project' }).click();
      const alert = page.getByRole('alert');
      await alert.waitFor();
      expect(await alert.getAttribute('data-code')).toBeTruthy();
      expect(await page.getByTestId('projects').locator('li').count()).toBe(0);

      await page.getByLabel('Repository URL or local path').fill(e.repo.url);
      await page.getByLabel('Provider').selectOption('LOCAL');
      await page.getByRole('button', { name: 'Create project' }).click();
      await page.getByRole('heading', { name: 'onboarded' }).waitFor();
      const stored = async () =>
        (
          (await e.t.raw(
            {
              query:
                '{ viewer { projects(first: 10) { edges { node { name repositoryUrl provider defaultBranch } } } } }',
            },
            seeded.token,
          )) as { data: { viewer: { projects: { edges: { node: Record<string, string> }[] } } } }
        ).data.viewer.projects.edges.map((edge) => edge.node);
      expect(await stored()).toEqual([
        { name: 'onboarded', repositoryUrl: e.repo.url, provider: 'LOCAL', defaultBranch: 'main' },
      ]);
      // The manifest was read at once: the project's templates are there without a sync.
      expect(await page.getByTestId('manifest-state').textContent()).toMatch(/^Manifest from [0-9a-f]{8}/);

      const settings = page.getByRole('region', { name: 'Settings' });
      await settings.getByLabel('Project name').fill('onboarded-renamed');
      await settings.getByRole('button', { name: 'Save changes' }).click();
      await page.getByRole('heading', { name: 'onboarded-renamed' }).waitFor();
      expect((await stored())[0]?.name).toBe('onboarded-renamed');

      await page.getByRole('button', { name: 'Re-sync manifest' }).click();
      await page.getByRole('status').filter({ hasText: 'Read the manifest at' }).waitFor();
      await screenshot(page, 'project-settings');
      expect(await seriousA11yViolations(page)).toEqual([]);

      await settings.getByRole('button', { name: 'Delete onboarded-renamed' }).click();
      await settings.getByRole('button', { name: 'Cancel' }).click();
      expect(await stored()).toHaveLength(1);
      await settings.getByRole('button', { name: 'Delete onboarded-renamed' }).click();
      await settings.getByRole('button', { name: 'Delete project' }).click();
      await page.getByTestId('no-projects').waitFor();
      expect(await stored()).toEqual([]);
      expect(other.problems).toEqual([]);
    } finally {
      await other.context.close();
    }
  });
});
