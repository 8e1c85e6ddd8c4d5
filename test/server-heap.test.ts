/**
 * `agentry serve` runs with the V8 heap sized for a server (bin/server-heap.js): the process replaces itself, keeping
 * its pid, with one started with `--max-semi-space-size`, unless NODE_OPTIONS or Node's command line sizes it
 * already, and with glibc's arenas bounded (MALLOC_ARENA_MAX) unless its environment sets them. Read from the running
 * server's /proc/<pid>/cmdline and /proc/<pid>/environ, so Linux only.
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { ARENAS, SEMI_SPACE_MB } from '../bin/server-heap.js';
import { testEnvironment } from './helpers/harness.ts';
import { launchServerProcess, startsTimeout } from './helpers/server-process.ts';

const BIN = join(import.meta.dirname, '..', 'bin', 'agentry.js');

/** Starts `agentry serve` with `nodeArgs`, reads its command line once it listens, stops it with SIGTERM. */
async function servedCommandLine(nodeArgs: string[], nodeOptions = '', env: Record<string, string> = {}) {
  return (await served(nodeArgs, nodeOptions, env)).commandLine;
}

/** The command line and the environment of `agentry serve` once it listens (stopped with SIGTERM after). */
async function served(nodeArgs: string[], nodeOptions: string, env: Record<string, string>) {
  const environment = testEnvironment('sqlite');
  try {
    const server = launchServerProcess({ ...environment.env, NODE_OPTIONS: nodeOptions, ...env }, [
      ...nodeArgs,
      BIN,
      'serve',
    ]);
    const url = await server.listening;
    // The pid the supervisor started is the server's: it answers, and its command line is the replaced one.
    expect((await fetch(`${url}/healthz`)).status).toBe(200);
    const read = (file: string) => readFileSync(`/proc/${server.child.pid}/${file}`, 'utf8').split('\0');
    const commandLine = read('cmdline').filter(Boolean);
    const environ = read('environ').filter(Boolean);
    expect(await server.stop(), server.output()).toBe(0);
    return { commandLine, environ };
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

  it(
    "bounds glibc's arenas, unless the environment sets them",
    async () => {
      const arenas = (environ: string[]) => environ.filter((entry) => entry.startsWith('MALLOC_ARENA_MAX='));
      expect(arenas((await served([], '', {})).environ)).toEqual([`MALLOC_ARENA_MAX=${ARENAS}`]);
      expect(arenas((await served([], '', { MALLOC_ARENA_MAX: '8' })).environ)).toEqual(['MALLOC_ARENA_MAX=8']);
    },
    startsTimeout(2),
  );
});
