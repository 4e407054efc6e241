import { createContext, useContext, useEffect } from 'react';
import type { ApiClient } from './client';

export const ApiContext = createContext<ApiClient | null>(null);

/** Runs `listener` whenever the WebSocket (re)connects: a view refetches what it may have missed. */
export function useOnConnected(listener: () => void): void {
  const api = useContext(ApiContext);
  useEffect(() => api?.onConnected(listener), [api, listener]);
}
