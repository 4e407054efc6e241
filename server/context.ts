// Authentication happens once per HTTP request and once per WebSocket connection (connection_init).
import type { ServerContext } from '../schema/builder';
import type { Principal } from '../resolvers/auth/principal';
import type { Services } from '../resolvers/services';

/** The context of an HTTP request, from its Authorization header (null when it has none). */
export async function httpContext(services: Services, authorization: string | null): Promise<ServerContext> {
  const principal = await services.tokens.authenticate(authorization);
  return { principal, services };
}

export function wsContext(services: Services, principal: Principal): ServerContext {
  return { principal, services };
}
