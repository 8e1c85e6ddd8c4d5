/**
 * No process a test starts through the helpers outlives its test file. A fixture test file starts a real server,
 * a test MCP server and a shell with a child of its own, never stops them, and hangs; it runs in a vitest run of
 * its own (the project's configuration, test/fixtures/children/), which then ends three ways: its test times out,
 * the run is interrupted with Ctrl-C, or its worker is killed with SIGKILL. Then none of them may be left.
 */
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { spawnChild } from './helpers/children.ts';
import { waitUntil } from './helpers/fixtures.ts';
import { startsTimeout } from './helpers/server-process.ts';

const ROOT = join(import.meta.dirname, '..');
const VITEST = join(ROOT, 'node_modules', 'vitest', 'vitest.mjs');
const CONFIG = join(ROOT, 'test', 'fixtures', 'children', 'vitest.config.ts');

/** Alive, and not a zombie waiting for a parent that never reaps it. */
function alive(pid: number): boolean {
  try {
    return !/^\d+ \(.*\) Z /.test(readFileSync(`/proc/${pid}/stat`, 'utf8'));
  } catch {
    return false;
  }
}

/** The parent of a process (the vitest worker, for the fixture's children). */
const parentOf = (pid: number): number =>
  Number(/^\d+ \(.*\) \S (\d+) /.exec(readFileSync(`/proc/${pid}/stat`, 'utf8'))?.[1]);

type Ending = 'times out' | 'is interrupted with Ctrl-C' | 'loses its worker to SIGKILL';

describe('processes started by a test file', () => {
  it.each<Ending>(['times out', 'is interrupted with Ctrl-C', 'loses its worker to SIGKILL'])(
    'are all gone once a run whose test %s ends',
    async (ending) => {
      const dir = mkdtempSync(join(tmpdir(), 'agentry-children-'));
      const pidsFile = join(dir, 'pids.json');
      // The run of its own gets the environment of a run, not of this worker.
      const env = Object.fromEntries(Object.entries(process.env).filter(([name]) => !name.startsWith('VITEST')));
      const run = spawnChild(process.execPath, [VITEST, 'run', '--config', CONFIG], {
        cwd: ROOT,
        env: {
          ...env,
          AGENTRY_CHILDREN_FIXTURE_PIDS: pidsFile,
          AGENTRY_CHILDREN_FIXTURE_DATA: join(dir, 'data'),
          AGENTRY_CHILDREN_FIXTURE_HANG: ending === 'times out' ? 'timeout' : 'forever',
        },
        stdio: ['ignore', 'pipe', 'pipe'],
      });
      let output = '';
      run.stdout?.on('data', (chunk) => {
        output += chunk;
      });
      run.stderr?.on('data', (chunk) => {
        output += chunk;
      });
      const exited = new Promise<number | null>((resolve) => run.once('exit', (code) => resolve(code)));
      let pids: number[] = [];
      try {
        pids = await waitUntil(
          async () => {
            if (existsSync(pidsFile)) return JSON.parse(readFileSync(pidsFile, 'utf8')) as number[];
            if (run.exitCode !== null) throw new Error(`the fixture run ended before its children started:\n${output}`);
            return null;
          },
          { what: 'the fixture to start its children', timeoutMs: startsTimeout(2, 0) },
        );
        expect(pids).toHaveLength(4);
        expect(pids.filter(alive)).toEqual(pids);
        // Which processes the ending must take down: all of them, but after a SIGKILL only the worker's own children
        // (the kernel's parent-death signal; the shell's child is orphaned, nothing runs in the worker any more).
        let expectedGone = pids;
        if (ending === 'is interrupted with Ctrl-C') {
          // A terminal sends SIGINT to its foreground process group: the run, its workers, not the children.
          process.kill(-(run.pid ?? 0), 'SIGINT');
        } else if (ending === 'loses its worker to SIGKILL') {
          process.kill(parentOf(pids[0] ?? 0), 'SIGKILL');
          expectedGone = pids.slice(0, 3);
        }
        const code = await exited;
        if (ending === 'times out') {
          expect(code, output).toBe(1);
          expect(output).toContain('Test timed out in 50ms');
        }
        await waitUntil(async () => (expectedGone.some(alive) ? null : true), {
          what: 'the fixture children to be gone',
        }).catch(() => undefined);
        expect(expectedGone.filter(alive), output).toEqual([]);
      } finally {
        // Should it still run (a failure above), the fixture run goes too, with its workers.
        const groups = run.exitCode === null && run.signalCode === null ? [-(run.pid ?? 0)] : [];
        for (const pid of [...groups, ...pids]) {
          try {
            process.kill(pid, 'SIGKILL');
          } catch {
            // gone
          }
        }
        rmSync(dir, { recursive: true, force: true });
      }
    },
    startsTimeout(3),
  );
});
