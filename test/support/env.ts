// Where the tests find PostgreSQL and Redis (R-RUN-4).
export const TEST_DATABASE_URL =
  process.env.TEST_DATABASE_URL ?? 'postgresql://postgres@127.0.0.1:5432/postgres';
export const TEST_REDIS_URL = process.env.TEST_REDIS_URL ?? 'redis://127.0.0.1:6379';

/**
 * The run's SINGULACOMP_FAST_PATHS, handed to every server a test starts (in-process or spawned):
 * `.ci/run` runs the GraphQL-facing files once more with `off`, so yoga and Prisma stay the
 * reference. A test's own `env` wins (the tests that pin a fast path turn it on).
 */
export const FAST_PATHS_ENV: Record<string, string> = process.env.SINGULACOMP_FAST_PATHS
  ? { SINGULACOMP_FAST_PATHS: process.env.SINGULACOMP_FAST_PATHS }
  : {};
