// OpenCode's model provider inside the sandbox is the control plane's LLM gateway (R-LLM-1): the
// daemon asks the gateway which models it serves and hands OpenCode a provider whose base URL is
// the gateway and whose API key is SINGULACOMP_TOKEN, so no model-provider key enters the sandbox.
import { request } from './http';
import type { Logger } from './logger';

/** Provider id of the gateway in OpenCode's config; models are selected as `singulacomp/<model>`. */
export const GATEWAY_PROVIDER_ID = 'singulacomp';

export function gatewayBaseUrl(apiUrl: string): string {
  return `${apiUrl.replace(/\/+$/, '')}/v1/llm/openai/v1`;
}

/** The OpenCode config fragment (OPENCODE_CONFIG_CONTENT) that routes every model call through the gateway. */
export function gatewayOpencodeConfig(apiUrl: string, token: string, models: readonly string[]) {
  return {
    provider: {
      [GATEWAY_PROVIDER_ID]: {
        npm: '@ai-sdk/openai-compatible',
        name: 'SingulaComp LLM gateway',
        options: { baseURL: gatewayBaseUrl(apiUrl), apiKey: token },
        // Image input on: screenshots reach the gateway, which keeps the newest 12 per request.
        models: Object.fromEntries(
          models.map((id) => [
            id,
            {
              name: id,
              tool_call: true,
              attachment: true,
              modalities: { input: ['text', 'image'], output: ['text'] },
            },
          ]),
        ),
      },
    },
  };
}

/** Model ids the gateway's upstream lists; empty when the gateway has none configured or is unreachable. */
export async function fetchGatewayModels(
  apiUrl: string,
  token: string,
  logger: Logger,
  timeoutMs = 10_000,
): Promise<string[]> {
  const log = logger.child({ module: 'llm-config' });
  try {
    const response = await request(`${gatewayBaseUrl(apiUrl)}/models`, {
      headers: { authorization: `Bearer ${token}` },
      signal: AbortSignal.timeout(timeoutMs),
    });
    if (!response.ok) {
      response.body.resume();
      log.warn({ status: response.status }, 'LLM gateway lists no models; OpenCode keeps its own providers');
      return [];
    }
    const body = (await response.json()) as { data?: Array<{ id?: unknown }> };
    return (body.data ?? []).map((m) => m.id).filter((id): id is string => typeof id === 'string');
  } catch (error) {
    log.warn({ err: (error as Error).message }, 'LLM gateway unreachable; OpenCode keeps its own providers');
    return [];
  }
}
