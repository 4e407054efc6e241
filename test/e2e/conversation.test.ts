// The conversation end to end on LOCAL: a client holding only a PAT talks to a real `opencode serve`
// whose model calls go through the server's LLM gateway to the stub upstream. sendMessage starts a
// turn, sessionEvents streams it in order (and resumes from a seq), messages reads it back,
// abortTurn ends a second turn and the cancelled turn's upstream call goes away.
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import {
  AbortTurnDocument,
  AgentSessionDocument,
  SendMessageDocument,
  SessionEventsDocument,
  SessionLlmUsageDocument,
  SessionMessagesDocument,
  type SessionEventsSubscription,
} from '../generated/graphql';
import { type LiveSession, createProject, startSession } from '../leases/helpers';
import { type Socket, type Watch, openSocket, watch } from '../realtime/helpers';
import { waitFor } from '../support/wait';
import { type E2e, SERVER_HELD_MODEL_KEY, startE2e } from './helpers';

type Event = SessionEventsSubscription['sessionEvents'];

describe('talking to the agent over GraphQL', () => {
  let e: E2e;
  let s: LiveSession;
  let pat: string;
  let socket: Socket;
  let events: Watch<SessionEventsSubscription>;

  beforeAll(async () => {
    e = await startE2e({ gateway: true, daemonEnv: { SINGULACOMP_ATTACHMENT_OFFLOAD: '0' } });
    pat = e.t.adminToken;
    s = await startSession(e.t, await createProject(e.t, e.repo.url));
    await waitFor(async () => {
      const v = await e.t.request(AgentSessionDocument, { id: s.sessionId });
      return v.data?.session?.sandbox?.runtimeState === 'HEALTHY';
    }, 90_000);
    socket = openSocket(e.t.wsUrl, pat);
    events = watch(socket, SessionEventsDocument, { sessionId: s.sessionId, after: 0 });
  });
  afterAll(async () => {
    await socket?.dispose();
    await e?.stop();
  });

  const received = (): Event[] => events.events.map((r) => r.data.sessionEvents);
  const turnEnded = (from: number) =>
    waitFor(async () => {
      const later = received().slice(from);
      const busy = later.findIndex((ev) => ev.kind === 'TURN_STATE' && ev.turnState === 'BUSY');
      return busy >= 0 && later.slice(busy).some((ev) => ev.kind === 'TURN_STATE' && ev.turnState !== 'BUSY');
    }, 50_000);

  test('a message sent with a PAT streams its answer over sessionEvents in order and reads back from messages', async ({
    onTestFailed,
  }) => {
    onTestFailed(async () => {
      console.error(
        `events: ${received().length}, stub requests: ${e.stub.requests.length}\n${await e.describeSession(s.sessionId)}`,
      );
    });
    e.stub.setReply('alpha beta gamma delta epsilon');
    const start = received().length;
    const sent = await e.t.request(
      SendMessageDocument,
      { input: { sessionId: s.sessionId, text: 'Say five words.' } },
      pat,
    );
    expect(sent.data?.sendMessage.__typename).toBe('SendMessageSuccess');
    await turnEnded(start);

    const turn = events.events.slice(start);
    // Gap-free, increasing seqs.
    const seqs = turn.map((r) => r.seq);
    expect(seqs).toEqual(seqs.map((_, i) => seqs[0]! + i));
    expect(turn.map((r) => r.data.sessionEvents.seq)).toEqual(seqs);
    const text = turn
      .map((r) => r.data.sessionEvents)
      .filter((ev) => ev.kind === 'TEXT_DELTA')
      .map((ev) => ev.delta)
      .join('');
    expect(text).toBe('alpha beta gamma delta epsilon');
    const states = turn.map((r) => r.data.sessionEvents).filter((ev) => ev.kind === 'TURN_STATE');
    expect(states[0]!.turnState).toBe('BUSY');
    expect(states.at(-1)!.turnState).toBe('IDLE');

    const page = await e.t.request(SessionMessagesDocument, { id: s.sessionId, first: 10 }, pat);
    const messages = page.data!.session!.messages.edges.map((edge) => edge.node);
    expect(messages.map((m) => m.role)).toEqual(['user', 'assistant']);
    expect(messages[0]!.text).toBe('Say five words.');
    expect(messages[1]!.text).toBe('alpha beta gamma delta epsilon');
    expect(messages[1]!.parts.some((p) => p.type === 'text')).toBe(true);
    // Cursor pagination over the transcript.
    const second = await e.t.request(
      SessionMessagesDocument,
      { id: s.sessionId, first: 1, after: page.data!.session!.messages.edges[0]!.cursor },
      pat,
    );
    expect(second.data!.session!.messages.edges.map((edge) => edge.node.id)).toEqual([messages[1]!.id]);
  });

  test('the stub upstream received the gateway’s calls with the server’s key, never a sandbox credential', async () => {
    expect(e.stub.requests.length).toBeGreaterThan(0);
    for (const request of e.stub.requests) {
      expect(request.headers.authorization).toBe(`Bearer ${SERVER_HELD_MODEL_KEY}`);
      expect(JSON.stringify(request.headers)).not.toContain(s.token);
    }
    const usage = await e.t.request(SessionLlmUsageDocument, { id: s.sessionId }, pat);
    expect(usage.data!.session!.llmUsage.requests).toBe(e.stub.requests.length);
    expect(usage.data!.session!.llmUsage.inputTokens).toBe(10 * e.stub.requests.length);
    expect(usage.data!.session!.llmUsage.outputTokens).toBe(5 * e.stub.requests.length);
  });

  test('a subscriber resuming with `after` gets exactly the events after that seq', async () => {
    const all = events.events;
    const from = all[Math.floor(all.length / 2)]!.seq;
    const resumed = watch(socket, SessionEventsDocument, { sessionId: s.sessionId, after: from });
    const tail = all.filter((r) => r.seq > from);
    const got = await resumed.waitForEvents(tail.length);
    resumed.unsubscribe();
    expect(got.map((r) => r.seq)).toEqual(tail.map((r) => r.seq));
    expect(got.map((r) => r.data)).toEqual(tail.map((r) => r.data));
  });

  test('abortTurn ends a running turn and cancels its upstream call', async () => {
    e.stub.setDelayMs(120_000);
    try {
      const start = received().length;
      const sent = await e.t.request(
        SendMessageDocument,
        { input: { sessionId: s.sessionId, text: 'Take your time.' } },
        pat,
      );
      expect(sent.data?.sendMessage.__typename).toBe('SendMessageSuccess');
      await waitFor(async () => e.stub.openResponses() > 0, 60_000);
      await waitFor(
        async () =>
          received()
            .slice(start)
            .some((ev) => ev.turnState === 'BUSY'),
        30_000,
      );
      const aborted = await e.t.request(AbortTurnDocument, { input: { sessionId: s.sessionId } }, pat);
      expect(aborted.data?.abortTurn).toMatchObject({ __typename: 'AbortTurnSuccess', aborted: true });
      await turnEnded(start);
      // The gateway passed the cancellation on: the upstream response was closed, not left hanging.
      await waitFor(async () => e.stub.openResponses() === 0, 30_000);
    } finally {
      e.stub.setDelayMs(0);
    }
  });

  test('an empty message is a validation error and a sandbox token cannot send one', async () => {
    const empty = await e.t.request(
      SendMessageDocument,
      { input: { sessionId: s.sessionId, text: '  ' } },
      pat,
    );
    expect(empty.data?.sendMessage).toMatchObject({ code: 'VALIDATION_FAILED', field: ['input', 'text'] });
    const bySandbox = await e.t.request(
      SendMessageDocument,
      { input: { sessionId: s.sessionId, text: 'hi' } },
      s.token,
    );
    expect(bySandbox.errors?.[0]?.extensions?.code).toBe('FORBIDDEN');
  });
  test('batches reported in a burst reach a subscriber whole and in order; a new socket resumes after its last seq', async () => {
    const report = async (batch: object[], accepted = batch.length) => {
      const res = await fetch(e.t.graphqlUrl, {
        method: 'POST',
        headers: { 'content-type': 'application/json', authorization: `Bearer ${s.token}` },
        body: JSON.stringify({
          query:
            'mutation($input: ReportAgentEventsInput!) { reportAgentEvents(input: $input) { ... on ReportAgentEventsSuccess { accepted } } }',
          variables: { input: { sessionId: s.sessionId, events: batch.map((ev) => JSON.stringify(ev)) } },
        }),
      });
      const body = (await res.json()) as { data?: { reportAgentEvents?: { accepted?: number } } };
      expect(body.data?.reportAgentEvents?.accepted).toBe(accepted);
    };
    const ids = { sessionID: 'ses_burst', messageID: 'msg_burst' };
    const part = {
      type: 'message.part.updated',
      properties: { part: { ...ids, id: 'prt_burst', type: 'text', text: '' } },
    };
    const words = Array.from({ length: 600 }, (_, i) => `w${i} `);
    const delta = (text: string) => ({
      type: 'message.part.delta',
      properties: { ...ids, partID: 'prt_burst', field: 'text', delta: text },
    });

    const first = openSocket(e.t.wsUrl, pat);
    const live = watch(first, SessionEventsDocument, { sessionId: s.sessionId });
    // The part (again) until the live-only subscription shows it: it is live from then on.
    await waitFor(async () => {
      await report([part]);
      return live.events.length > 0;
    }, 30_000);
    for (let i = 0; i < words.length; i += 100) await report(words.slice(i, i + 100).map(delta));
    // A part event of the loop above may still arrive after the first: the deltas follow them all.
    const deltas = () => live.events.filter((r) => r.data.sessionEvents.kind === 'TEXT_DELTA');
    await waitFor(async () => deltas().length >= words.length, 60_000);
    const got = deltas();
    expect(got.map((r) => r.data.sessionEvents.delta)).toEqual(words);
    expect(got.map((r) => r.seq)).toEqual(got.map((_, i) => got[0]!.seq + i));
    expect(got.map((r) => r.data.sessionEvents.seq)).toEqual(got.map((r) => r.seq));

    // A client that lost its socket after the 250th delta resumes on a new one, from that seq.
    await first.dispose();
    const second = openSocket(e.t.wsUrl, pat);
    try {
      const resumed = watch(second, SessionEventsDocument, { sessionId: s.sessionId, after: got[249]!.seq });
      const rest = await resumed.waitForEvents(words.length - 250, 30_000);
      expect(rest.map((r) => r.data.sessionEvents.delta)).toEqual(words.slice(250));
      expect(rest.map((r) => r.seq)).toEqual(got.slice(250).map((r) => r.seq));
    } finally {
      await second.dispose();
    }

    // The record holds every delta of the part, in order.
    const page = await e.t.request(SessionMessagesDocument, { id: s.sessionId, first: 50 }, pat);
    const parts = page.data!.session!.messages.edges.flatMap((edge) => edge.node.parts);
    expect(parts.find((p) => p.id === 'prt_burst')?.text).toBe(words.join(''));

    // A batch that changes only the record (no sessionEvents) leaves the stream's seq where it was;
    // the next event takes the seq after it.
    const pubsub = e.t.app.services.pubsub;
    const last = got.at(-1)!.seq;
    expect(await pubsub.currentSeq('sessionEvents', s.sessionId)).toBe(last);
    await report([{ type: 'message.part.removed', properties: { ...ids, partID: 'prt_gone' } }], 0);
    expect(await pubsub.currentSeq('sessionEvents', s.sessionId)).toBe(last);
    await report([delta('after ')]);
    expect(await pubsub.currentSeq('sessionEvents', s.sessionId)).toBe(last + 1);
  });
});
