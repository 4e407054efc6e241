// A sessionEvents subscriber in a process of its own, as a browser or the CLI is: graphql-ws's
// client over ws. Forked by bench/session-gateway.ts with the socket URL, a token and the session
// id; it checks the events it receives arrive in order (each seq one above the last). Messages: it
// sends {ready} once the first event arrived; given {until: seq} it answers {reached: seq} as soon
// as the event of that seq arrived (at once when it already has), or {failed}.
import { createClient } from 'graphql-ws';
import WebSocket from 'ws';

const [url, token, sessionId] = process.argv.slice(2);
if (!url || !token || !sessionId || !process.send) {
  console.error('usage: fork(events-subscriber.ts, [wsUrl, token, sessionId])');
  process.exit(2);
}
const send = (message: object) => process.send!(message);

let lastSeq: number | null = null;
let until: number | null = null;

const client = createClient({
  url,
  webSocketImpl: WebSocket,
  connectionParams: { authorization: token },
  retryAttempts: 0,
  lazy: false,
  onNonLazyError: (error) => send({ failed: `connection: ${String(error)}` }),
});

client.subscribe(
  {
    query: 'subscription($sessionId: ID!) { sessionEvents(sessionId: $sessionId) { seq kind delta } }',
    variables: { sessionId },
  },
  {
    next: (value) => {
      if (value.errors?.length) {
        send({ failed: JSON.stringify(value.errors) });
        return;
      }
      const seq = Number((value.extensions as { seq?: number } | undefined)?.seq);
      if (lastSeq !== null && seq !== lastSeq + 1) send({ failed: `seq ${seq} after ${lastSeq}` });
      if (lastSeq === null) send({ ready: true });
      lastSeq = seq;
      if (until !== null && seq >= until) {
        send({ reached: seq });
        until = null;
      }
    },
    error: (error) => send({ failed: `subscription: ${JSON.stringify(error)}` }),
    complete: () => send({ failed: 'subscription completed' }),
  },
);

process.on('message', (message: { until?: number; stop?: boolean }) => {
  if (message.stop) {
    void client.dispose();
    process.disconnect();
    return;
  }
  if (typeof message.until !== 'number') return;
  if (lastSeq !== null && lastSeq >= message.until) send({ reached: lastSeq });
  else until = message.until;
});
