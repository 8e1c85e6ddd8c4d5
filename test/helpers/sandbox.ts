/**
 * What the sandbox suites share: one bubblewrap detection per file, the rule for skipping (a visible notice when
 * bwrap is missing, but never under CI=true, where a missing sandbox must fail the run), scratch data directories
 * the sandbox user can reach, and a helper that runs a host-side command for positive checks.
 */
import { spawnSync } from 'node:child_process';
import { chmodSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pino from 'pino';
import { describe } from 'vitest';
import { type BubblewrapDetection, detectBubblewrap } from '../../src/tools/sandbox/bubblewrap-detect.ts';
import { SandboxError, WorkspacePathError } from '../../src/tools/sandbox/sandbox-errors.ts';

export const detection: BubblewrapDetection = await detectBubblewrap();
export const inCi = process.env.CI === 'true';

if (!detection.available && !inCi) {
  process.stdout.write(`\n[agentry] sandbox suites skipped: ${detection.reason}\n          (${detection.hint})\n\n`);
}

/** `describe`, skipped with the notice above when the sandbox is unavailable outside CI. */
export const describeSandbox: typeof describe.skip = detection.available || inCi ? describe : describe.skip;

export const silentLogger = pino({ level: 'silent' });

/**
 * A stand-in for the orgs table: each organization name gets the next project id when first seen, so two
 * organizations of one test get two sandbox identities.
 */
export function testProjectIds(): (orgId: string) => Promise<number> {
  const ids = new Map<string, number>();
  return async (orgId) => {
    if (!ids.has(orgId)) ids.set(orgId, ids.size + 1);
    return ids.get(orgId) ?? 0;
  };
}

/** A data directory the sandbox user can traverse (mkdtemp makes it 0700), removed by the returned function. */
export function scratchDataDir(prefix: string): { path: string; remove: () => void } {
  const path = mkdtempSync(join(tmpdir(), prefix));
  chmodSync(path, 0o711);
  return { path, remove: () => rmSync(path, { recursive: true, force: true }) };
}

/** `ok`, or the code of the sandbox error the promise rejects with (any other error is rethrown). */
export async function errorCode(promise: Promise<unknown>): Promise<string> {
  try {
    await promise;
    return 'ok';
  } catch (error) {
    if (error instanceof WorkspacePathError || error instanceof SandboxError) return error.code;
    throw error;
  }
}

/** Host processes whose command line starts with `prefix` (the host sees into every PID namespace). */
export function hostProcesses(prefix: string): string[] {
  const result = spawnSync('ps', ['-eo', 'args'], { encoding: 'utf8' });
  return result.stdout.split('\n').filter((line) => line.startsWith(prefix));
}

/** Runs a bash command on the host, outside any sandbox: the positive control of an isolation test. */
export function onHost(command: string, env: Record<string, string> = {}): { status: number | null; stdout: string } {
  const result = spawnSync('bash', ['-c', command], {
    encoding: 'utf8',
    timeout: 60_000,
    env: { ...process.env, ...env },
  });
  return { status: result.status, stdout: result.stdout };
}
