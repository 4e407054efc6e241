// The `Error` interface and one GraphQL type per expected failure (resolvers/errors.ts).
import {
  BaseRefNotFoundError,
  ConflictError,
  type DomainError,
  InvitationExpiredError,
  InvitationUsedError,
  InvitationWrongAccountError,
  LeaseFencedError,
  ManifestInvalidError,
  NotFoundError,
  RepositoryUnreachableError,
  ReservedSecretNameError,
  ValidationError,
} from '../resolvers/errors';
import { builder } from './builder';

export const ErrorInterface = builder.interfaceRef<DomainError>('Error').implement({
  description: 'Implemented by every expected failure a mutation can return in its payload union.',
  fields: (t) => ({
    code: t.exposeString('code'),
    message: t.exposeString('message'),
    field: t.exposeStringList('field', { nullable: true, description: 'Path of the input field at fault.' }),
  }),
});

const FieldProblem = builder.objectRef<{ field: string[]; message: string }>('FieldProblem').implement({
  fields: (t) => ({
    field: t.exposeStringList('field'),
    message: t.exposeString('message'),
  }),
});

function errorType(cls: typeof ValidationError, name: string, description: string) {
  builder.objectType(cls, {
    name,
    description,
    interfaces: [ErrorInterface],
    isTypeOf: (value: unknown) => value instanceof cls,
    fields: () => ({}),
  });
}

errorType(ValidationError, 'ValidationError', 'Input is well-typed but invalid.');
errorType(NotFoundError, 'NotFoundError', 'An id names nothing the caller can see.');
errorType(ConflictError, 'ConflictError', 'The request conflicts with current state.');
errorType(ReservedSecretNameError, 'ReservedSecretNameError', 'The SINGULACOMP_ prefix is reserved.');
errorType(BaseRefNotFoundError, 'BaseRefNotFoundError', 'baseRef does not exist in the repository.');
errorType(RepositoryUnreachableError, 'RepositoryUnreachableError', 'The repository could not be read.');
errorType(LeaseFencedError, 'LeaseFencedError', 'The lease generation is no longer current.');
errorType(InvitationUsedError, 'InvitationUsedError', 'The invitation was already accepted (single use).');
errorType(InvitationExpiredError, 'InvitationExpiredError', 'The invitation is past its expiry.');
errorType(
  InvitationWrongAccountError,
  'InvitationWrongAccountError',
  'The caller already belongs to another account than the invitation’s.',
);

builder.objectType(ManifestInvalidError, {
  name: 'ManifestInvalidError',
  description: 'The manifest is missing or invalid; problems lists every field at fault.',
  interfaces: [ErrorInterface],
  isTypeOf: (value) => value instanceof ManifestInvalidError,
  fields: (t) => ({
    problems: t.field({ type: [FieldProblem], resolve: (e) => e.problems }),
  }),
});

/** The error classes every mutation payload may carry. */
export const COMMON_ERRORS = [ValidationError, NotFoundError, ConflictError];
