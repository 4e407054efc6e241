// The floor of bench/session-events.ts's path: the same hops with no work of ours. A bare node:http
// endpoint in the server's process takes the reporter's POSTs (the reportAgentEvents body, read
// for its events and nothing else), appends each batch to the event log and publishes it (the
// baseline's publishMany), and a bare WebSocket hands every published event to the subscriber
// process as a graphql-ws frame (enough of its protocol for graphql-ws's client), a batch's frames
// in one write as the server sends them. No GraphQL, token, policy or session record: what it
// loses against the in-process baseline is the transport's own cost (two more processes, HTTP in,
// a WebSocket frame out per event).
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { WebSocketServer } from 'ws';
import { coalesceSends } from '../../server/realtime';
import type { E2e } from '../../test/e2e/helpers';

type PubSub = E2e['t']['app']['services']['pubsub'];

export interface BareEvents {
  /** Where the reporter posts. */
  url: string;
  /** Where the subscriber connects. */
  wsUrl: string;
  close(): void;
}

/** One OpenCode text delta → the sessionEvents payload reportAgentEvents would publish. */
function payloadOf(key: string, text: string) {
  const event = JSON.parse(text) as { properties?: { sessionID?: string; delta?: string } };
  return {
    sessionId: key,
    accountId: key,
    event: {
      kind: 'TEXT_DELTA' as const,
      opencodeSessionId: event.properties?.sessionID ?? null,
      delta: event.properties?.delta ?? '',
    },
  };
}

export async function startBareEvents(pubsub: PubSub): Promise<BareEvents> {
  const server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (chunk: Buffer) => chunks.push(chunk));
    req.on('end', () => {
      const body = JSON.parse(Buffer.concat(chunks).toString('utf8')) as {
        variables: { input: { sessionId: string; events: string[] } };
      };
      const { sessionId: key, events } = body.variables.input;
      pubsub
        .publishMany(
          'sessionEvents',
          key,
          events.map((text) => payloadOf(key, text)),
        )
        .then(
          () => {
            res.writeHead(200, { 'content-type': 'application/json' });
            res.end('{"data":{"reportAgentEvents":{"__typename":"ReportAgentEventsSuccess"}}}');
          },
          (error: unknown) => {
            res.writeHead(500, { 'content-type': 'application/json' });
            res.end(JSON.stringify({ errors: [{ message: String(error) }] }));
          },
        );
    });
  });
  const wss = new WebSocketServer({ server, handleProtocols: () => 'graphql-transport-ws' });
  wss.on('connection', (ws) => {
    ws.on('message', (data) => {
      const message = JSON.parse(String(data)) as {
        type: string;
        id?: string;
        payload?: { variables?: { sessionId?: string } };
      };
      if (message.type === 'connection_init') ws.send('{"type":"connection_ack"}');
      if (message.type !== 'subscribe' || !message.id) return;
      const id = message.id;
      const key = message.payload?.variables?.sessionId ?? '';
      const stream = pubsub.subscribe('sessionEvents', key, { after: null });
      ws.once('close', () => void stream.return?.());
      // One write for the events of one batch, as the server's WebSocket sends them.
      coalesceSends(ws);
      void (async () => {
        for await (const envelope of stream) {
          const { event } = envelope.payload as ReturnType<typeof payloadOf>;
          ws.send(
            JSON.stringify({
              id,
              type: 'next',
              payload: {
                data: { sessionEvents: { seq: envelope.seq, kind: event.kind, delta: event.delta } },
                extensions: { seq: envelope.seq },
              },
            }),
          );
        }
      })().catch(() => ws.close());
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const port = (server.address() as AddressInfo).port;
  return {
    url: `http://127.0.0.1:${port}/graphql`,
    wsUrl: `ws://127.0.0.1:${port}/graphql`,
    close: () => {
      for (const client of wss.clients) client.terminate();
      wss.close();
      server.closeAllConnections();
      server.close();
    },
  };
}
