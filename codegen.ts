// graphql-codegen: typed documents from the committed SDL, for the tests (test/generated) and for the
// daemon and the CLI (contract/generated), so a schema change that breaks either fails type-checking.
import type { CodegenConfig } from '@graphql-codegen/cli';

const typesConfig = {
  scalars: { DateTime: 'string', ID: 'string' },
  enumsAsTypes: true,
  avoidOptionals: { field: true, inputValue: false },
  useTypeImports: true,
};

const config: CodegenConfig = {
  schema: 'schema.graphql',
  generates: {
    'test/generated/graphql.ts': {
      documents: ['test/documents/**/*.graphql'],
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
      documents: ['contract/documents/cli.graphql'],
      plugins: ['typescript', 'typescript-operations', 'typed-document-node'],
      config: typesConfig,
    },
  },
  errorsOnly: true,
};

export default config;
