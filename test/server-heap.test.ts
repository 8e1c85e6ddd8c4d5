/**
 * `agentry serve` runs with the V8 heap sized for a server (bin/server-heap.js): the process replaces itself, keeping
 * its pid, with one started with `--max-semi-space-size`, unless NODE_OPTIONS or Node's command line sizes it
 * already. Read from the running server's /proc/<pid>/cmdline, so Linux only.
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { SEMI_SPACE_MB } from '../bin/server-heap.js';
import { spawnChild } from './helpers/children.ts';
import { testEnvironment } from './helpers/harness.ts';
import { listeningUrl, startsTimeout } from './helpers/server-process.ts';

const BIN = join(import.meta.dirname, '..', 'bin', 'agentry.js');

function childEnv(extra: Record<string, string>): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = { ...process.env };
  for (const name of Object.keys(env)) {
    if (name === 'DATABASE_URL' || name === 'REDIS_URL' || name === 'NODE_OPTIONS' || name.startsWith('AGENTRY_'))
      delete env[name];
  }
  return { ...env, PORT: '0', HOST: '127.0.0.1', LOG_LEVEL: 'warn', ...extra };
}

/** Starts `agentry serve` with `nodeArgs`, reads its command line once it listens, stops it with SIGTERM. */
async function servedCommandLine(nodeArgs: string[], extra: Record<string, string> = {}): Promise<string[]> {
  const environment = testEnvironment('sqlite');
  try {
    const child = spawnChild(process.execPath, [...nodeArgs, BIN, 'serve'], {
      env: childEnv({ ...environment.env, ...extra }),
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let output = '';
    child.stdout?.on('data', (chunk: Buffer) => {
      output += chunk.toString();
    });
    child.stderr?.on('data', (chunk: Buffer) => {
      output += chunk.toString();
    });
    const url = await listeningUrl(child, 'the server', /listening on (http:\/\/[0-9.]+:\d+)/, () => output);
    // The pid the supervisor started is the server's: it answers, and its command line is the replaced one.
    expect((await fetch(`${url}/healthz`)).status).toBe(200);
    const commandLine = readFileSync(`/proc/${child.pid}/cmdline`, 'utf8').split('\0').filter(Boolean);
    const exited = new Promise((resolve) => child.once('exit', resolve));
    child.kill('SIGTERM');
    await exited;
    expect({ code: child.exitCode, signal: child.signalCode }, output).toEqual({ code: 0, signal: null });
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
      const fromOptions = await servedCommandLine([], { NODE_OPTIONS: '--max-semi-space-size=4' });
      expect(fromOptions.some((argument) => argument.startsWith('--max-semi-space-size'))).toBe(false);
    },
    startsTimeout(2),
  );
});
