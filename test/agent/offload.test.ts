import { randomBytes } from 'node:crypto';
import { describe } from 'vitest';
import { OFFLOAD_MARKER, PLACEHOLDER_PNG_DATA_URL } from '../../agent/offload';
import { runSqlite } from '../../agent/sqlite';
import { expect, test, waitFor } from './helpers';

const HEADER = 'x-singulacomp-user-context';
// OpenCode rejects undecodable images; a real 1×1 PNG with distinct trailing bytes per attachment passes.
const PNG = Buffer.from(
  'iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAQAAAC1HAwCAAAAC0lEQVR42mNkYAAAAAYAAjCB0C8AAAAASUVORK5CYII=',
  'base64',
);

describe('attachment offload', () => {
  test('keeps the newest 12 attachments per session, moves the rest and cleared tool results, and serves them back', async ({
    startAgent,
  }) => {
    const h = await startAgent();
    // The pass every daemon runs at start must not run into the data this test builds next.
    await h.agent.offloadsSettled();
    const opencode = h.agent.supervisor.current!.client;
    const session = await opencode.createSession('screenshots');
    const images = Array.from({ length: 14 }, (_, i) =>
      Buffer.concat([PNG, Buffer.from(`image-${i}-`), randomBytes(2048)]),
    );
    // A real turn stores the attachments in OpenCode's transcript.
    const response = await fetch(`${opencode.baseUrl}/session/${session.id}/message`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({
        parts: [
          { type: 'text', text: 'Here are the screenshots.' },
          ...images.map((bytes, i) => ({
            type: 'file',
            mime: 'image/png',
            filename: `shot-${i}.png`,
            url: `data:image/png;base64,${bytes.toString('base64')}`,
          })),
        ],
      }),
    });
    expect(response.status).toBe(200);
    await waitFor(async () => Object.keys(await opencode.sessionStatus()).length === 0, 20_000, 'turn end');

    const db = (await h.agent.offloader.findDb())!;
    expect(db).toBe(`${h.home}/.local/share/opencode/opencode.db`);
    const fileParts = await runSqlite<{ id: string; message_id: string; data: string }>(
      db,
      `SELECT id, message_id, data FROM part WHERE session_id = ?
         AND json_extract(data, '$.type') = 'file' ORDER BY id;`,
      [session.id],
    );
    expect(fileParts).toHaveLength(14);

    // A tool result OpenCode's compaction already cleared (state.time.compacted), in OpenCode's schema.
    const toolOutput = `tool output ${randomBytes(64).toString('hex')}`;
    const toolPart = {
      type: 'tool',
      tool: 'bash',
      callID: 'call_1',
      state: {
        status: 'completed',
        input: { command: 'ls' },
        output: toolOutput,
        title: 'ls',
        metadata: {},
        time: { start: 1, end: 2, compacted: 3 },
      },
    };
    const toolPartId = 'prt_zzzzzzzzzzzzcompactedtool1';
    const messageId = fileParts[0]!.message_id;
    await runSqlite(
      db,
      'INSERT INTO part (id, message_id, session_id, time_created, time_updated, data) VALUES (?, ?, ?, 1, 1, ?);',
      [toolPartId, messageId, session.id, JSON.stringify(toolPart)],
    );

    const result = await h.agent.offloadIfIdle();
    expect(result).toMatchObject({ attachments: 2, toolOutputs: 1, parts: 3 });

    const after = await runSqlite<{ id: string; data: string }>(
      db,
      'SELECT id, data FROM part WHERE session_id = ? ORDER BY id;',
      [session.id],
    );
    const files = after.filter((row) => JSON.parse(row.data).type === 'file');
    const offloaded = files.filter((row) => JSON.parse(row.data)[OFFLOAD_MARKER]);
    // Part ids sort by creation: the two oldest moved out, the newest 12 kept their bytes.
    expect(offloaded.map((row) => row.id)).toEqual(fileParts.slice(0, 2).map((row) => row.id));
    for (const [i, row] of files.slice(2).entries()) {
      expect(JSON.parse(row.data).url).toBe(`data:image/png;base64,${images[i + 2]!.toString('base64')}`);
    }
    for (const row of offloaded) {
      const data = JSON.parse(row.data);
      expect(data.url).toBe(PLACEHOLDER_PNG_DATA_URL);
      expect(data[OFFLOAD_MARKER]).toMatchObject({
        id: row.id,
        mime: 'image/png',
        url: `/singulacomp/part/${row.id}`,
      });
    }
    const tool = JSON.parse(after.find((row) => row.id === toolPartId)!.data);
    expect(tool.state.output).not.toContain(toolOutput);
    expect(tool.state[OFFLOAD_MARKER].id).toBe(`${toolPartId}-output`);

    // The bytes left the transcript entirely (OpenCode's event log included).
    const original = images[0]!.toString('base64');
    const leftovers = await runSqlite<{ n: number }>(
      db,
      `SELECT (SELECT count(*) FROM part WHERE instr(data, ?1) > 0)
            + (SELECT count(*) FROM event WHERE instr(data, ?1) > 0) AS n;`,
      [original],
    );
    expect(leftovers[0]!.n).toBe(0);

    // /singulacomp/part/<id> serves the real bytes (with the header), OpenCode serves the placeholder.
    for (const [index, row] of offloaded.entries()) {
      const res = await fetch(`${h.url}/singulacomp/part/${row.id}`, {
        headers: { [HEADER]: h.userContext() },
      });
      expect(res.status).toBe(200);
      expect(res.headers.get('content-type')).toBe('image/png');
      expect(Buffer.from(await res.arrayBuffer()).equals(images[index]!)).toBe(true);
    }
    const output = await fetch(`${h.url}/singulacomp/part/${toolPartId}-output`, {
      headers: { [HEADER]: h.userContext() },
    });
    expect(await output.text()).toBe(toolOutput);
    expect((await fetch(`${h.url}/singulacomp/part/${offloaded[0]!.id}`)).status).toBe(401);
    expect(
      (await fetch(`${h.url}/singulacomp/part/prt_unknown`, { headers: { [HEADER]: h.userContext() } }))
        .status,
    ).toBe(404);

    const viaOpencode = (await (
      await fetch(`${opencode.baseUrl}/session/${session.id}/message`)
    ).json()) as Array<{
      parts: Array<{ id: string; url?: string }>;
    }>;
    const served = viaOpencode.flatMap((m) => m.parts).find((p) => p.id === offloaded[0]!.id)!;
    expect(served.url).toBe(PLACEHOLDER_PNG_DATA_URL);

    // A second pass finds nothing left to move.
    expect(await h.agent.offloadIfIdle()).toMatchObject({ attachments: 0, toolOutputs: 0 });
  });

  test('SINGULACOMP_ATTACHMENT_OFFLOAD=0 turns the offload off', async ({ startAgent }) => {
    const h = await startAgent({ agent: { attachmentOffload: false } });
    expect(await h.agent.offloadIfIdle()).toBeNull();
  });
});
