/**
 * The per-run directories of sandboxed commands, with real servers and real bubblewrap: they live in a folder of
 * the server's own in its temp directory. A server killed with kill -9 during a run leaves its folder; the next
 * start removes it (and not the folder of a process still alive); a graceful shutdown during a run leaves none.
 */
import { chmodSync, existsSync, mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { expect, it } from 'vitest';
import { createRunFolders, RUN_FOLDER_PREFIX } from '../src/tools/sandbox/run-folders.ts';
import { httpClient, waitUntil } from './helpers/fixtures.ts';
import { testEnvironment, testKey } from './helpers/harness.ts';
import { describeSandbox, silentLogger } from './helpers/sandbox.ts';
import { CRASH_TEST_ENV, type ServerProcess, startServerProcess, startsTimeout } from './helpers/server-process.ts';

const SANDBOX = { kind: 'internal', name: 'sandbox' };

/** The per-run directories under `temp`: in the run folders of processes, or (as before those) right in it. */
function runDirectories(temp: string): string[] {
  const found: string[] = [];
  for (const name of readdirSync(temp).filter((entry) => entry.startsWith('agentry-sandbox-'))) {
    if (!name.startsWith(RUN_FOLDER_PREFIX)) found.push(join(temp, name));
    else {
      const folder = join(temp, name);
      for (const run of readdirSync(folder)) if (run !== 'alive.sock') found.push(join(folder, run));
    }
  }
  return found;
}

describeSandbox('sandbox run folders across kill -9 and shutdown', () => {
  it(
    'removes what a killed server left at the next start, and leaves nothing after a graceful stop',
    async () => {
      // A temp directory of the servers' own (searchable by the sandbox users, as /tmp is), to see all they leave.
      const temp = mkdtempSync(join(tmpdir(), 'agentry-test-tmp-'));
      chmodSync(temp, 0o711);
      const environment = testEnvironment('sqlite');
      const key = testKey();
      const env = {
        ...environment.env,
        ...CRASH_TEST_ENV,
        TMPDIR: temp,
        AGENTRY_BOOTSTRAP_KEY: key,
        AGENTRY_SHUTDOWN_GRACE_MS: '4000',
      };
      // The folder of another live process on the same machine: no start may take it.
      const neighbour = await createRunFolders({ parent: temp, logger: silentLogger });
      let server: ServerProcess | null = null;
      try {
        server = await startServerProcess(env);
        const api = httpClient(server.url, key);
        const agentId = (await api('POST', '/v1/agents', { name: 'sleeper', mcpServers: [SANDBOX] })).body?.agent.id;
        const sessionId = (await api('POST', '/v1/sessions', { agentId })).body?.session.id;
        const accepted = await api(
          'POST',
          `/v1/sessions/${sessionId}/messages`,
          { parts: [{ type: 'text', text: 'call sandbox_run {"command":"sleep 300"}\n---\nwoke up' }] },
          { 'Idempotency-Key': 'sleep-1' },
        );
        expect(accepted.status).toBe(202);
        const killed = await waitUntil(async () => runDirectories(temp)[0], {
          what: 'the sandbox run to start',
          everyMs: 50,
        });
        await server.stop('SIGKILL');
        expect(existsSync(killed), 'what kill -9 leaves behind').toBe(true);

        server = await startServerProcess(env);
        // The new server sweeps while its sandbox is detected, which goes on after it is ready.
        await waitUntil(async () => !existsSync(killed) || undefined, { what: 'the killed run folder to go' });
        expect(existsSync(dirname(killed))).toBe(dirname(killed) === temp);
        expect(existsSync(neighbour.path)).toBe(true);
        // The resumed turn runs its command again, in the new server's folder.
        const resumed = await waitUntil(async () => runDirectories(temp)[0], {
          what: 'the resumed sandbox run to start',
          everyMs: 50,
        });
        expect(dirname(resumed)).not.toBe(dirname(killed));

        expect(await server.stop('SIGTERM')).toBe(0);
        // Only the neighbour's folder is left: no run folder, run directory or bubblewrap trial directory.
        expect(readdirSync(temp).map((name) => join(temp, name))).toEqual([neighbour.path]);
      } finally {
        await server?.stop('SIGKILL');
        await neighbour.close();
        await environment.cleanup();
        rmSync(temp, { recursive: true, force: true });
      }
    },
    startsTimeout(2),
  );
});
