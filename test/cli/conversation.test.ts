// Working with an agent from the CLI, against a real LOCAL sandbox (the real daemon and OpenCode,
// the stub model): `sessions create --wait` returns once the agent can take a turn, `sessions send
// --wait` prints the streamed answer, `sessions logs` prints the conversation and `sessions watch`
// replays and follows it.
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { type E2e, E2E_SETUP_TIMEOUT_MS, startE2e } from '../e2e/helpers';
import { createProject } from '../leases/helpers';
import { runCli } from './helpers';

describe('sessions create --wait, send, logs and watch', () => {
  let e: E2e;
  let projectId: string;
  let env: Record<string, string>;
  let sessionId: string;
  const cli = (args: string[]) => runCli(e.t.dataDir, args, env);

  beforeAll(async () => {
    e = await startE2e({ daemonEnv: { SINGULACOMP_ATTACHMENT_OFFLOAD: '0' } });
    projectId = await createProject(e.t, e.repo.url);
    const home = mkdtempSync(join(tmpdir(), 'sc-cli-chat-'));
    env = {
      HOME: home,
      SINGULACOMP_CONFIG_DIR: join(home, 'config'),
      SINGULACOMP_API_URL: e.t.url,
      SINGULACOMP_TOKEN: e.t.adminToken,
    };
  }, E2E_SETUP_TIMEOUT_MS);
  afterAll(async () => e?.stop());

  test('create --wait returns with the agent ready', async ({ onTestFailed }) => {
    onTestFailed(async () => console.error(sessionId && (await e.describeSession(sessionId))));
    const result = await cli(['--json', 'sessions', 'create', projectId, '--wait']);
    expect(result.code, result.stderr).toBe(0);
    const session = JSON.parse(result.stdout) as { sessionId: string; status: string; agentReady: boolean };
    sessionId = session.sessionId;
    expect(session).toMatchObject({ status: 'RUNNING', agentReady: true });
    const row = await e.t.app.services.db.session.findUniqueOrThrow({ where: { id: sessionId } });
    expect(row.status).toBe('RUNNING');
  });

  test('send --wait prints the answer as it streams and exits when the turn ends', async () => {
    e.stub.setReply('Hello from the stub, via the CLI.');
    const result = await cli(['sessions', 'send', sessionId, 'Say', 'hello.', '--wait']);
    expect(result.code, result.stderr).toBe(0);
    expect(result.stdout).toBe('Hello from the stub, via the CLI.\n');
    expect(e.stub.requests.length).toBeGreaterThan(0);
  });

  test('logs prints the conversation; --json gives the messages', async () => {
    const human = await cli(['sessions', 'logs', sessionId]);
    expect(human.code, human.stderr).toBe(0);
    expect(human.stdout).toMatch(
      /^You · .*\n {2}Say hello\.\n\nAgent · .*\n {2}Hello from the stub, via the CLI\.\n$/,
    );
    const result = await cli(['--json', 'sessions', 'logs', sessionId]);
    const messages = JSON.parse(result.stdout) as Array<{ role: string; text: string }>;
    expect(messages.map((m) => [m.role, m.text])).toEqual([
      ['user', 'Say hello.'],
      ['assistant', 'Hello from the stub, via the CLI.'],
    ]);
  });

  test('watch --from-start --until-idle replays the turn and exits', async () => {
    const result = await cli(['sessions', 'watch', sessionId, '--from-start', '--until-idle']);
    expect(result.code, result.stderr).toBe(0);
    expect(result.stdout).toBe('Hello from the stub, via the CLI.\n');
  });

  test('send without --wait only sends; a stopped session cannot take a message', async () => {
    e.stub.setReply('Second answer.');
    const sent = await cli(['sessions', 'send', sessionId, 'Again.']);
    expect(sent).toMatchObject({ code: 0, stdout: `Sent to session ${sessionId}.\n` });
    expect((await cli(['sessions', 'stop', sessionId, '--yes'])).code).toBe(0);
    const refused = await cli(['sessions', 'send', sessionId, 'Too late.']);
    expect(refused.code).toBe(1);
    expect(refused.stderr.trimEnd().split('\n')).toHaveLength(1);
  });
});
