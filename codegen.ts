// graphql-codegen: typed documents from the committed SDL, for the tests (test/generated), the daemon
// and the CLI (contract/generated) and the dashboard (web/src/generated), so a schema change that
// breaks any of them fails type-checking. The tests, the CLI and the dashboard share one set of
// fragments (contract/documents/fragments.graphql), part of each of their targets' documents.
import type { CodegenConfig } from '@graphql-codegen/cli';

const typesConfig = {
  scalars: { DateTime: 'string', ID: 'string' },
  enumsAsTypes: true,
  avoidOptionals: { field: true, inputValue: false },
  useTypeImports: true,
};

const FRAGMENTS = 'contract/documents/fragments.graphql';

const config: CodegenConfig = {
  schema: 'schema.graphql',
  generates: {
    'test/generated/graphql.ts': {
      documents: ['test/documents/**/*.graphql', FRAGMENTS],
      plugins: ['typescript', 'typescript-operations', 'typed-document-node'],
      config: typesConfig,
    },
    // The daemon posts plain strings (no graphql runtime inside the sandbox): documentMode 'string'.
    'contract/generated/daemon.ts': {
      documents: ['contract/documents/daemon.graphql'],
      plugins: ['typescript', 'typescript-operations', 'typed-document-node'],
      config: { ...typesConfig, documentMode: 'string' },
    },
    // The CLI's operations: contract/ is the one module the CLI shares with the control plane.
    'contract/generated/cli.ts': {
      documents: ['contract/documents/cli.graphql', FRAGMENTS],
      plugins: ['typescript', 'typescript-operations', 'typed-document-node'],
      config: typesConfig,
    },
    // The dashboard (web/): only the public API, typed documents for urql.
    'web/src/generated/graphql.ts': {
      documents: ['web/src/**/*.graphql', FRAGMENTS],
      plugins: ['typescript', 'typescript-operations', 'typed-document-node'],
      config: typesConfig,
    },
  },
  errorsOnly: true,
};

export default config;
