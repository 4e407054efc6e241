import type { SessionFieldsFragment } from './generated/graphql';

export function StatusBadge({ status }: { status: string }) {
  return (
    <span className={`badge badge-${status.toLowerCase()}`} data-testid="status">
      {status}
    </span>
  );
}

export function agentLabel(s: Pick<SessionFieldsFragment, 'agentReady' | 'runtimeState' | 'status'>): string {
  if (s.agentReady) return `ready (${(s.runtimeState ?? 'HEALTHY').toLowerCase()})`;
  if (s.status === 'RUNNING') return s.runtimeState ? s.runtimeState.toLowerCase() : 'starting';
  return '—';
}

export function formatUsd(value: number): string {
  return `$${value.toFixed(value < 1 ? 4 : 2)}`;
}
