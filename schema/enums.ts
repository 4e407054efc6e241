// Enums shared across domains; values come from the Prisma schema so the two can never drift.
import {
  AccountTier,
  Provider,
  ReloadPhaseName,
  ReloadPhaseStatus,
  ReloadStatus,
  SandboxStatus,
  SessionStatus,
  SnapshotStatus,
  StopReason,
  TelemetryReason,
  TokenKind,
  UserRole,
} from '../prisma/generated/client/enums';
import { RUNTIME_STATES } from '../resolvers/daemon/runtime-state';
import { builder } from './builder';

export const SessionStatusEnum = builder.enumType(SessionStatus, {
  name: 'SessionStatus',
  description: 'QUEUED, BRANCHING and COMPLETED exist for compatibility and are never stored or returned.',
});
export const SandboxStatusEnum = builder.enumType(SandboxStatus, { name: 'SandboxStatus' });
export const ProviderEnum = builder.enumType(Provider, { name: 'Provider' });
export const AccountTierEnum = builder.enumType(AccountTier, { name: 'AccountTier' });
export const TokenKindEnum = builder.enumType(TokenKind, { name: 'TokenKind' });
export const StopReasonEnum = builder.enumType(StopReason, { name: 'StopReason' });
export const TelemetryReasonEnum = builder.enumType(TelemetryReason, { name: 'TelemetryReason' });
export const ReloadPhaseNameEnum = builder.enumType(ReloadPhaseName, { name: 'ReloadPhaseName' });
export const ReloadPhaseStatusEnum = builder.enumType(ReloadPhaseStatus, { name: 'ReloadPhaseStatus' });
export const ReloadStatusEnum = builder.enumType(ReloadStatus, { name: 'ReloadStatus' });
export const SnapshotStatusEnum = builder.enumType(SnapshotStatus, { name: 'SnapshotStatus' });

export const RuntimeStateEnum = builder.enumType('RuntimeState', {
  description: "OpenCode's state as the sandbox daemon sees it.",
  values: RUNTIME_STATES,
});

export const UserRoleEnum = builder.enumType(UserRole, {
  name: 'UserRole',
  description: "A member's role in their account: ADMIN runs the account (members, tier, service accounts).",
});
