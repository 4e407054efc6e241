// What a session's status does not say on its own: RUNNING means the sandbox is up; whether the
// agent inside can take a turn is the daemon's report of OpenCode (Sandbox.runtimeState).

/** OpenCode states in which a prompt is accepted (BUSY queues it behind the running turn). */
export const AGENT_READY_STATES: ReadonlySet<string> = new Set(['HEALTHY', 'IDLE', 'BUSY']);

/** The session's view of its agent: the runtime state while RUNNING, null otherwise. */
export function sessionRuntimeState(status: string, runtimeState: string | null | undefined): string | null {
  return status === 'RUNNING' ? (runtimeState ?? null) : null;
}

/** true once the session is RUNNING and OpenCode reported a state in which it takes a turn. */
export function isAgentReady(status: string, runtimeState: string | null | undefined): boolean {
  const state = sessionRuntimeState(status, runtimeState);
  return state !== null && AGENT_READY_STATES.has(state);
}

export type { SessionSnapshot } from '../events/channels';
