// The LLM gateway's rules (R-LLM-1): who may call it (a live sandbox token), which upstream serves
// an account, how many images a request may carry, how upstream failures read to the caller, and
// the per-session token usage taken from the upstream's own usage fields. The HTTP transport is
// server/llm-gateway.ts.
import type { SandboxPrincipal } from '../auth/principal';
import { can } from '../auth/policy';
import type { TokenService } from '../auth/tokens';
import type { Logger, RawSql } from '../platform';

export interface LlmUpstream {
  baseUrl: string;
  apiKey: string | null;
}

/** The gateway's settings (server/env.ts maps SINGULACOMP_LLM_* onto them). */
export interface LlmConfig {
  openai: LlmUpstream | null;
  anthropic: LlmUpstream | null;
  /** accountId → per-account upstreams, which win over the server-wide ones. */
  accounts: Record<string, { openai?: LlmUpstream; anthropic?: LlmUpstream }>;
  maxImages: number;
}

export type LlmFormat = 'openai' | 'anthropic';

/** Thrown for every request the gateway answers itself; `type` is the machine-readable reason. */
export class GatewayError extends Error {
  constructor(
    readonly status: number,
    readonly type: string,
    message: string,
    readonly headers: Record<string, string> = {},
  ) {
    super(message);
  }
}

export interface TokenUsage {
  inputTokens: number;
  outputTokens: number;
}

export const IMAGE_PLACEHOLDER =
  '[image omitted: only the newest images of a conversation are sent to the model]';

function isImagePart(part: unknown, format: LlmFormat): boolean {
  if (!part || typeof part !== 'object') return false;
  const type = (part as { type?: unknown }).type;
  return format === 'openai' ? type === 'image_url' || type === 'input_image' : type === 'image';
}

/**
 * Keeps the newest `max` images across all messages (the last ones in the array are the newest),
 * replacing older ones in place with a short text part. Anthropic tool results nest their own
 * content arrays, which count too. Returns how many were replaced.
 */
export function trimImages(body: unknown, format: LlmFormat, max: number): number {
  const messages = (body as { messages?: unknown })?.messages;
  if (!Array.isArray(messages)) return 0;
  // Every content array holding an image part, in document order.
  const slots: Array<{ array: unknown[]; index: number }> = [];
  const visit = (content: unknown): void => {
    if (!Array.isArray(content)) return;
    content.forEach((part, index) => {
      if (isImagePart(part, format)) slots.push({ array: content, index });
      else if (part && typeof part === 'object' && Array.isArray((part as { content?: unknown }).content)) {
        visit((part as { content: unknown[] }).content);
      }
    });
  };
  for (const message of messages) visit((message as { content?: unknown })?.content);
  const excess = slots.length - max;
  if (excess <= 0) return 0;
  for (const slot of slots.slice(0, excess))
    slot.array[slot.index] = { type: 'text', text: IMAGE_PLACEHOLDER };
  return excess;
}

function num(value: unknown): number {
  return typeof value === 'number' && Number.isFinite(value) && value >= 0 ? value : 0;
}

/** Usage from one JSON document: a whole response, or one streamed event/chunk. */
export function usageFrom(format: LlmFormat, json: unknown): Partial<TokenUsage> | null {
  if (!json || typeof json !== 'object') return null;
  const doc = json as Record<string, unknown>;
  if (format === 'openai') {
    const usage = doc.usage as Record<string, unknown> | null | undefined;
    if (!usage) return null;
    return { inputTokens: num(usage.prompt_tokens), outputTokens: num(usage.completion_tokens) };
  }
  // Anthropic: a whole message carries both; a stream splits them over message_start (input, and
  // an output count so far) and message_delta (the final output count).
  if (doc.type === 'message_start') {
    const usage = (doc.message as { usage?: Record<string, unknown> } | undefined)?.usage;
    return usage ? { inputTokens: inputOfAnthropic(usage), outputTokens: num(usage.output_tokens) } : null;
  }
  const usage = doc.usage as Record<string, unknown> | undefined;
  if (!usage) return null;
  if (doc.type === 'message_delta') return { outputTokens: num(usage.output_tokens) };
  return { inputTokens: inputOfAnthropic(usage), outputTokens: num(usage.output_tokens) };
}

function inputOfAnthropic(usage: Record<string, unknown>): number {
  return (
    num(usage.input_tokens) + num(usage.cache_creation_input_tokens) + num(usage.cache_read_input_tokens)
  );
}

/** Follows an SSE stream chunk by chunk and keeps the latest usage it announced. */
export class StreamUsage {
  private buffer = '';
  private readonly decoder = new TextDecoder();
  readonly usage: TokenUsage = { inputTokens: 0, outputTokens: 0 };
  seen = false;

  constructor(private readonly format: LlmFormat) {}

  push(chunk: Uint8Array): void {
    this.buffer += this.decoder.decode(chunk, { stream: true });
    let index = this.buffer.indexOf('\n\n');
    while (index !== -1) {
      this.frame(this.buffer.slice(0, index));
      this.buffer = this.buffer.slice(index + 2);
      index = this.buffer.indexOf('\n\n');
    }
    // A frame never legitimately grows this large; do not let a broken stream grow memory.
    if (this.buffer.length > 1_000_000) this.buffer = '';
  }

  private frame(frame: string): void {
    // Most frames are deltas: only one naming usage is worth splitting into lines.
    if (!frame.includes('usage')) return;
    const data = frame
      .replaceAll('\r', '')
      .split('\n')
      .filter((line) => line.startsWith('data:'))
      .map((line) => line.slice(5).trimStart())
      .join('\n');
    if (!data || data === '[DONE]' || !data.includes('usage')) return;
    let json: unknown;
    try {
      json = JSON.parse(data);
    } catch {
      return;
    }
    const found = usageFrom(this.format, json);
    if (!found) return;
    this.seen = true;
    if (found.inputTokens !== undefined) this.usage.inputTokens = found.inputTokens;
    if (found.outputTokens !== undefined) this.usage.outputTokens = found.outputTokens;
  }
}

/**
 * Upstream answer → what the caller sees. One row per case; the caller's own mistakes (4xx about
 * the request) pass through, the server's credential and the upstream's health become 502s that
 * say whose problem it is.
 */
export function mapUpstreamStatus(
  status: number,
  format: LlmFormat,
): { status: number; type: string; message: string } | null {
  if (status >= 200 && status < 300) return null;
  const name = format === 'openai' ? 'OpenAI-compatible' : 'Anthropic';
  if (status === 401 || status === 403) {
    return {
      status: 502,
      type: 'upstream_credential_rejected',
      message: `The ${name} upstream rejected the gateway's credential (HTTP ${status}); the server's LLM configuration must be fixed.`,
    };
  }
  if (status === 429) {
    return {
      status: 429,
      type: 'rate_limited',
      message: `The ${name} upstream is rate limiting; retry later.`,
    };
  }
  if (status >= 500) {
    return {
      status: 502,
      type: 'upstream_error',
      message: `The ${name} upstream failed (HTTP ${status}); retry later.`,
    };
  }
  return {
    status,
    type: 'invalid_request',
    message: `The ${name} upstream refused the request (HTTP ${status}).`,
  };
}

/** The error body in the caller's own API dialect, so its SDK shows the message. */
export function errorBody(format: LlmFormat, type: string, message: string): string {
  return JSON.stringify(
    format === 'openai'
      ? { error: { type, code: type, message } }
      : { type: 'error', error: { type, message } },
  );
}

export interface LlmGatewayOptions {
  /** One prepared upsert per request instead of Prisma's (about 4 ms of a completion's total). */
  sql: RawSql;
  tokens: TokenService;
  llm: LlmConfig;
  logger: Logger;
}

const RECORD_USAGE = `INSERT INTO "LlmUsage" ("sessionId", "requests", "inputTokens", "outputTokens", "updatedAt")
VALUES ($1::uuid, $4::int, $2::bigint, $3::bigint, CURRENT_TIMESTAMP)
ON CONFLICT ("sessionId") DO UPDATE SET
  "requests" = "LlmUsage"."requests" + EXCLUDED."requests",
  "inputTokens" = "LlmUsage"."inputTokens" + EXCLUDED."inputTokens",
  "outputTokens" = "LlmUsage"."outputTokens" + EXCLUDED."outputTokens",
  "updatedAt" = CURRENT_TIMESTAMP`;

/** Usage of a session's requests not yet written. */
interface UsageBatch {
  requests: number;
  inputTokens: number;
  outputTokens: number;
}

export type LlmGatewayService = ReturnType<typeof createLlmGatewayService>;

export function createLlmGatewayService(options: LlmGatewayOptions) {
  const { tokens, llm } = options;
  const log = options.logger.child({ module: 'llm-gateway' });
  /**
   * A session's concurrent requests share one upsert: while one is being written, the usage of
   * the requests that end meanwhile waits in one batch (per session) and is written as one row
   * update when it ends (at concurrency 4, about half the upserts; each took ~190 µs of the
   * server's CPU). Writes of a session never overlap, so they never contend for its row's lock.
   */
  const waiting = new Map<string, { batch: UsageBatch; written: Promise<void> }>();
  const writing = new Map<string, Promise<void>>();

  async function write(sessionId: string, batch: UsageBatch): Promise<void> {
    try {
      await options.sql.query(
        RECORD_USAGE,
        [sessionId, String(batch.inputTokens), String(batch.outputTokens), batch.requests],
        { prepared: 'llm-usage-record-batch' },
      );
    } catch (error) {
      log.warn({ err: error, sessionId, requests: batch.requests }, 'llm usage not recorded');
    }
  }

  return {
    maxImages: llm.maxImages,

    /**
     * The caller's sandbox principal. OpenAI clients send `Authorization: Bearer`, Anthropic
     * clients `x-api-key`; either carries SINGULACOMP_TOKEN. A revoked or foreign token is refused.
     */
    async authenticate(headers: { authorization?: string; 'x-api-key'?: string | string[] }) {
      const apiKey = Array.isArray(headers['x-api-key']) ? headers['x-api-key'][0] : headers['x-api-key'];
      const authorization = headers.authorization ?? (apiKey ? `Bearer ${apiKey}` : undefined);
      if (!authorization) {
        throw new GatewayError(401, 'authentication_error', 'Send SINGULACOMP_TOKEN as the API key.');
      }
      let principal: Awaited<ReturnType<TokenService['authenticate']>>;
      try {
        principal = await tokens.authenticate(authorization);
      } catch (error) {
        throw new GatewayError(401, 'authentication_error', (error as Error).message);
      }
      if (!can(principal, 'llm.call')) {
        throw new GatewayError(
          403,
          'permission_error',
          'The LLM gateway accepts only a sandbox token (SINGULACOMP_TOKEN).',
        );
      }
      // The policy allows only a sandbox token here.
      return principal as SandboxPrincipal;
    },

    /** The upstream that serves this account in this dialect: its own override, else the server's. */
    upstream(principal: SandboxPrincipal, format: LlmFormat): LlmUpstream {
      const upstream = llm.accounts[principal.accountId]?.[format] ?? llm[format];
      if (!upstream) {
        throw new GatewayError(
          503,
          'upstream_not_configured',
          `No ${format} upstream is configured on this server (SINGULACOMP_LLM_${format.toUpperCase()}_BASE_URL).`,
        );
      }
      return upstream;
    },

    /**
     * Adds one request's usage to its session's counters; resolves once a write holding it has
     * ended, so the caller's next read sees it. Never throws into the response path.
     */
    record(sessionId: string, usage: TokenUsage): Promise<void> {
      let next = waiting.get(sessionId);
      if (!next) {
        const batch: UsageBatch = { requests: 0, inputTokens: 0, outputTokens: 0 };
        const written = (writing.get(sessionId) ?? Promise.resolve()).then(() => {
          waiting.delete(sessionId);
          return write(sessionId, batch);
        });
        next = { batch, written };
        waiting.set(sessionId, next);
        writing.set(sessionId, written);
        void written.then(() => {
          if (writing.get(sessionId) === written) writing.delete(sessionId);
        });
      }
      next.batch.requests += 1;
      next.batch.inputTokens += usage.inputTokens;
      next.batch.outputTokens += usage.outputTokens;
      return next.written;
    },
  };
}
