// `singulacomp sessions create --wait|send|logs|watch`: waiting for a session's agent, printing its
// conversation (Session.messages) and following its events (sessionEvents) as readable lines.
import {
  CliSessionEventsDocument,
  type CliSessionEventsSubscription,
  type CliMessageFragment,
  CliSessionMessagesDocument,
  type CliSessionMessagesQuery,
  type SessionFieldsFragment,
  CliSessionUpdatedDocument,
} from '../contract/generated/cli';
import type { ApiClient } from './client';
import { CliExit } from './errors';

type Part = CliMessageFragment['parts'][number];
type AgentEvent = CliSessionEventsSubscription['sessionEvents'];

const ENDED = new Set(['STOPPED', 'FAILED', 'COMPLETED']);

/**
 * Resolves once the session's agent can take a turn; a session that ends first is a CliExit with its
 * reason. Follows sessionUpdated from the seq the caller saw, so no change in between is missed.
 */
export async function waitForAgent(
  client: ApiClient,
  session: SessionFieldsFragment,
): Promise<SessionFieldsFragment> {
  if (session.agentReady) return session;
  if (ENDED.has(session.status)) throw ended(session);
  let last = session;
  await client.subscribe(CliSessionUpdatedDocument, { id: session.id, after: session.seq }, (data) => {
    last = data.sessionUpdated;
    return last.agentReady || ENDED.has(last.status);
  });
  if (!last.agentReady) throw ended(last);
  return last;
}

function ended(session: SessionFieldsFragment): CliExit {
  return new CliExit(
    `Session ${session.sessionId} is ${session.status}${session.failureReason ? `: ${session.failureReason}` : ''}.`,
  );
}

/** Every message of the session's conversation, oldest first. */
export async function readMessages(client: ApiClient, id: string): Promise<CliMessageFragment[]> {
  const messages: CliMessageFragment[] = [];
  let after: string | null | undefined = null;
  do {
    const session: CliSessionMessagesQuery['session'] = (
      await client.request(CliSessionMessagesDocument, { id, after })
    ).session;
    if (!session) throw new CliExit(`No session ${id}.`);
    messages.push(...session.messages.edges.map((edge) => edge.node));
    after = session.messages.pageInfo.hasNextPage ? session.messages.pageInfo.endCursor : null;
  } while (after);
  return messages;
}

function clip(text: string, max = 2_000): string {
  return text.length > max ? `${text.slice(0, max)}… (${text.length - max} more characters)` : text;
}

function indent(text: string, prefix = '    '): string {
  return text
    .trimEnd()
    .split('\n')
    .map((line) => `${prefix}${line}`)
    .join('\n');
}

/** A tool call as lines: the tool, its status and input, then its output or error. */
export function formatToolCall(
  part: Pick<Part, 'tool' | 'toolStatus' | 'toolInput' | 'toolOutput' | 'toolError'>,
): string {
  const lines = [
    `  ⚙ ${part.tool ?? 'tool'} (${part.toolStatus ?? 'pending'})${part.toolInput ? ` ${clip(part.toolInput, 500)}` : ''}`,
  ];
  if (part.toolError) lines.push(indent(`error: ${clip(part.toolError)}`));
  else if (part.toolOutput) lines.push(indent(clip(part.toolOutput)));
  return `${lines.join('\n')}\n`;
}

/** The conversation as a transcript: one block per message, tool calls with their output. */
export function formatTranscript(messages: CliMessageFragment[]): string {
  if (messages.length === 0) return '(no messages yet)\n';
  return messages
    .map((message) => {
      const head = `${message.role === 'user' ? 'You' : 'Agent'}${message.createdAt ? ` · ${message.createdAt}` : ''}`;
      const body = message.parts
        .map((part) => {
          if (part.type === 'text' && part.text) return `${indent(part.text, '  ')}\n`;
          if (part.type === 'tool') return formatToolCall(part);
          return '';
        })
        .join('');
      const fallback = body || (message.text ? `${indent(message.text, '  ')}\n` : '');
      return `${head}\n${fallback}${message.error ? `  ✖ ${message.error}\n` : ''}`;
    })
    .join('\n');
}

export interface WatchOptions {
  /** Replay events after this seq first. @default live only */
  after?: number;
  /** Stop once a turn ends (IDLE or ERROR after BUSY). */
  untilTurnEnds?: boolean;
  write: (text: string) => void;
  /** Runs once the stream is followed (to send a message then, so none of its events is missed). */
  onFollowing?: () => Promise<void>;
}

/**
 * Follows the session's events and writes them as they come: the agent's text as it streams, a line
 * per finished tool call, a line per turn state. Resolves when the stream ends, or with
 * untilTurnEnds once a turn that was seen busy is idle again; a turn's error is a CliExit.
 */
export async function watchEvents(
  client: ApiClient,
  sessionId: string,
  options: WatchOptions,
): Promise<void> {
  let busy = false;
  let midLine = false;
  let failure: string | null = null;
  const out = (text: string) => {
    options.write(text);
    midLine = !text.endsWith('\n');
  };
  const newline = () => {
    if (midLine) out('\n');
  };
  await client.subscribe(
    CliSessionEventsDocument,
    { sessionId, after: options.after },
    (data) => {
      const event: AgentEvent = data.sessionEvents;
      switch (event.kind) {
        case 'TEXT_DELTA':
          if (event.delta && event.role !== 'user') out(event.delta);
          return false;
        case 'TOOL_CALL':
          if (event.part && (event.part.toolStatus === 'completed' || event.part.toolStatus === 'error')) {
            newline();
            out(formatToolCall(event.part));
          }
          return false;
        case 'TURN_STATE':
          if (event.turnState === 'BUSY' || event.turnState === 'RETRY') {
            busy = true;
            return false;
          }
          newline();
          if (event.turnState === 'ERROR') {
            failure = event.error ?? 'the turn failed';
            out(`✖ ${failure}\n`);
          }
          return Boolean(options.untilTurnEnds && busy);
        default:
          return false;
      }
    },
    options.onFollowing,
  );
  newline();
  if (failure) throw new CliExit(`The turn ended with an error: ${failure}`);
}
