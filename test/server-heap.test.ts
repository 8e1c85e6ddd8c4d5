/**
 * `agentry serve` runs with the V8 heap sized for a server (bin/server-heap.js): the process replaces itself, keeping
 * its pid, with one started with `--max-semi-space-size`, unless NODE_OPTIONS or Node's command line sizes it
 * already. Read from the running server's /proc/<pid>/cmdline, so Linux only.
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { SEMI_SPACE_MB } from '../bin/server-heap.js';
import { testEnvironment } from './helpers/harness.ts';
import { launchServerProcess, startsTimeout } from './helpers/server-process.ts';

const BIN = join(import.meta.dirname, '..', 'bin', 'agentry.js');

/** Starts `agentry serve` with `nodeArgs`, reads its command line once it listens, stops it with SIGTERM. */
async function servedCommandLine(nodeArgs: string[], nodeOptions = ''): Promise<string[]> {
  const environment = testEnvironment('sqlite');
  try {
    const server = launchServerProcess({ ...environment.env, NODE_OPTIONS: nodeOptions }, [...nodeArgs, BIN, 'serve']);
    const url = await server.listening;
    // The pid the supervisor started is the server's: it answers, and its command line is the replaced one.
    expect((await fetch(`${url}/healthz`)).status).toBe(200);
    const commandLine = readFileSync(`/proc/${server.child.pid}/cmdline`, 'utf8').split('\0').filter(Boolean);
    expect(await server.stop(), server.output()).toBe(0);
    return commandLine;
  } finally {
    await environment.cleanup();
  }
}

describe.skipIf(process.platform !== 'linux')('the heap of agentry serve', () => {
  it(
    'sizes the semi-spaces in the same process, keeping the Node.js options it was given',
    async () => {
      const commandLine = await servedCommandLine(['--no-warnings']);
      expect(commandLine).toContain(`--max-semi-space-size=${SEMI_SPACE_MB}`);
      expect(commandLine).toContain('--no-warnings');
      expect(commandLine.slice(-2)).toEqual([BIN, 'serve']);
    },
    startsTimeout(1),
  );

  it(
    'leaves a size given on the command line or in NODE_OPTIONS as it is',
    async () => {
      const given = await servedCommandLine(['--max-semi-space-size=8']);
      expect(given.filter((argument) => argument.startsWith('--max-semi-space-size'))).toEqual([
        '--max-semi-space-size=8',
      ]);
      const fromOptions = await servedCommandLine([], '--max-semi-space-size=4');
      expect(fromOptions.some((argument) => argument.startsWith('--max-semi-space-size'))).toBe(false);
    },
    startsTimeout(2),
  );
});
