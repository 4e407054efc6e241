// Expected failures. Each class becomes a GraphQL type implementing `Error { code message field }`
// (schema/errors.ts) and is returned inside a mutation's `<Op>Payload` union. Authentication,
// authorization and limits are top-level GraphQLErrors instead (see authz.ts).
import { GraphQLError } from 'graphql';

export abstract class DomainError extends Error {
  abstract readonly code: string;
  constructor(
    message: string,
    /** Path of the input field at fault, e.g. ['input', 'name']. */
    readonly field: string[] | null = null,
  ) {
    super(message);
  }
}

/** Thrown when input is well-typed but invalid (length, format, range). */
export class ValidationError extends DomainError {
  override readonly code: string = 'VALIDATION_FAILED';
}

/** Thrown when an id names nothing the caller can see. */
export class NotFoundError extends DomainError {
  override readonly code: string = 'NOT_FOUND';
}

/** Thrown when the request conflicts with current state (duplicate name, wrong status). */
export class ConflictError extends DomainError {
  override readonly code: string = 'CONFLICT';
}

/** Thrown when a secret name uses the platform's reserved `SINGULACOMP_` prefix. */
export class ReservedSecretNameError extends DomainError {
  override readonly code: string = 'RESERVED_SECRET_NAME';
}

/** Thrown when `baseRef` does not exist in the project's repository. */
export class BaseRefNotFoundError extends DomainError {
  override readonly code: string = 'BASE_REF_NOT_FOUND';
}

/** Thrown when the project's repository cannot be reached (URL, credential, network). */
export class RepositoryUnreachableError extends DomainError {
  override readonly code: string = 'REPOSITORY_UNREACHABLE';
}

/** Thrown when a manifest is missing or invalid; `problems` lists every field at fault. */
export class ManifestInvalidError extends DomainError {
  override readonly code: string = 'MANIFEST_INVALID';
  constructor(
    message: string,
    readonly problems: Array<{ field: string[]; message: string }>,
    field: string[] | null = null,
  ) {
    super(message, field);
  }
}

/** Thrown when a lease operation names a generation that is no longer current (R-LEASE-4). */
export class LeaseFencedError extends DomainError {
  override readonly code: string = 'LEASE_FENCED';
}

/** Thrown when an invitation token was already redeemed (single use). */
export class InvitationUsedError extends DomainError {
  override readonly code: string = 'INVITATION_USED';
}

/** Thrown when an invitation token is past its expiry. */
export class InvitationExpiredError extends DomainError {
  override readonly code: string = 'INVITATION_EXPIRED';
}

/** Thrown when the caller already belongs to an account other than the invitation's. */
export class InvitationWrongAccountError extends DomainError {
  override readonly code: string = 'INVITATION_WRONG_ACCOUNT';
}

export function unauthenticated(message = 'Authentication required: send Authorization: Bearer <token>.') {
  return new GraphQLError(message, { extensions: { code: 'UNAUTHENTICATED', http: { status: 401 } } });
}

export function forbidden(message = 'This credential is not allowed to do that.') {
  return new GraphQLError(message, { extensions: { code: 'FORBIDDEN' } });
}

export function badUserInput(message: string, field?: string[]) {
  return new GraphQLError(message, { extensions: { code: 'BAD_USER_INPUT', ...(field ? { field } : {}) } });
}

/**
 * True for a unique-key violation, whether it came from a Prisma model call (P2002) or from raw SQL
 * through the driver adapter (PostgreSQL's 23505 in the message).
 */
export function isUniqueViolation(error: unknown): boolean {
  const { code, message } = (error ?? {}) as { code?: string; message?: string };
  return code === 'P2002' || /unique constraint|23505/i.test(String(message));
}
