// The OpenAI upstream's model list as the server reads it for a new sandbox (SINGULACOMP_LLM_MODELS,
// docs/agent-api.md): a daemon told the gateway's models starts OpenCode without first asking the
// gateway, which asks the upstream. Read through the same upstream and key the gateway uses, once
// per upstream for `ttlMs`, and handed on when it names models; without a list the daemon asks the
// gateway itself at its start, so an upstream that was down is seen by the next sandbox. With no
// upstream configured for the account the list is empty, and handed on as such: the gateway would
// answer the daemon's question with none (the server's configuration is fixed for its lifetime).
import type { Logger } from '../platform';
import type { LlmConfig, LlmUpstream } from './llm';

export interface GatewayModelsOptions {
  llm: LlmConfig;
  logger: Logger;
  /** How long one upstream's list is reused. @default 60_000 */
  ttlMs?: number;
  /** How long the upstream may take to answer. @default 5_000 */
  timeoutMs?: number;
  /** @default Date.now */
  now?: () => number;
}

export type GatewayModels = ReturnType<typeof createGatewayModels>;

export function createGatewayModels(options: GatewayModelsOptions) {
  const log = options.logger.child({ module: 'llm-models' });
  const ttlMs = options.ttlMs ?? 60_000;
  const timeoutMs = options.timeoutMs ?? 5_000;
  const now = options.now ?? Date.now;
  /** One entry per upstream (base URL and key): concurrent provisionings share one request. */
  const cache = new Map<string, { at: number; models: Promise<string[] | null> }>();

  async function read(upstream: LlmUpstream): Promise<string[] | null> {
    try {
      const response = await fetch(`${upstream.baseUrl.replace(/\/+$/, '')}/models`, {
        headers: upstream.apiKey ? { authorization: `Bearer ${upstream.apiKey}` } : {},
        signal: AbortSignal.timeout(timeoutMs),
      });
      if (!response.ok) {
        await response.body?.cancel();
        log.warn({ status: response.status }, 'the upstream lists no models; daemons ask the gateway');
        return null;
      }
      const body = (await response.json()) as { data?: Array<{ id?: unknown }> };
      const models = (body.data ?? []).map((m) => m.id).filter((id): id is string => typeof id === 'string');
      return models.length > 0 ? models : null;
    } catch (error) {
      log.warn({ err: (error as Error).message }, 'the upstream is unreachable; daemons ask the gateway');
      return null;
    }
  }

  return {
    /**
     * The model ids of the OpenAI upstream that serves `accountId`; [] when none is configured; null
     * when it lists none or cannot be read (not cached: the next call asks again).
     */
    async forAccount(accountId: string): Promise<string[] | null> {
      const upstream = options.llm.accounts[accountId]?.openai ?? options.llm.openai;
      if (!upstream) return [];
      const key = `${upstream.baseUrl}\n${upstream.apiKey ?? ''}`;
      const cached = cache.get(key);
      if (cached && now() - cached.at < ttlMs) return cached.models;
      const entry = { at: now(), models: read(upstream) };
      cache.set(key, entry);
      const models = await entry.models;
      if (models === null && cache.get(key) === entry) cache.delete(key);
      return models;
    },
  };
}
