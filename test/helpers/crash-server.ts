/**
 * The opening of a crash test: a fresh database and key, the server process's environment (CRASH_TEST_ENV and any
 * additions), and, once the file's tests end, the last server started killed and the database removed.
 */
import { afterAll } from 'vitest';
import { type DialectName, testEnvironment, testKey } from './harness.ts';
import { CRASH_TEST_ENV, type ServerProcess } from './server-process.ts';

export function crashTestEnv(
  dialect: DialectName,
  lastServer: () => ServerProcess | null,
  extra: Record<string, string> = {},
): { key: string; env: Record<string, string> } {
  const environment = testEnvironment(dialect);
  const key = testKey();
  afterAll(async () => {
    await lastServer()?.stop('SIGKILL');
    await environment.cleanup();
  });
  return { key, env: { ...environment.env, ...CRASH_TEST_ENV, AGENTRY_BOOTSTRAP_KEY: key, ...extra } };
}
