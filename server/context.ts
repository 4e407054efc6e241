// Authentication happens once per HTTP request and once per WebSocket connection (connection_init).
import type { Context } from '../schema/builder';
import type { Principal } from '../resolvers/auth/principal';
import type { Services } from '../resolvers/services';

export async function httpContext(services: Services, request: Request): Promise<Context> {
  const principal = await services.tokens.authenticate(request.headers.get('authorization'));
  return { principal, services };
}

export function wsContext(services: Services, principal: Principal): Context {
  return { principal, services };
}
