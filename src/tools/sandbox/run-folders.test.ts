import { spawn } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, rmSync, statSync, symlinkSync, utimesSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pino from 'pino';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { createRunFolders, sweepRunFolders } from './run-folders.ts';

const logger = pino({ level: 'silent' });

/** A folder whose process listened in it and was killed with SIGKILL: its socket file stays, refusing connections. */
async function killedHolder(path: string): Promise<void> {
  mkdirSync(path);
  const child = spawn(
    process.execPath,
    [
      '-e',
      `require('node:net').createServer().listen(${JSON.stringify(join(path, 'alive.sock'))}, () => console.log('ready'))`,
    ],
    { stdio: ['ignore', 'pipe', 'inherit'] },
  );
  await new Promise<void>((resolve, reject) => {
    child.stdout.once('data', () => resolve());
    child.once('exit', (code) => reject(new Error(`the holder exited with ${code}`)));
  });
  const exited = new Promise((resolve) => child.once('exit', resolve));
  child.kill('SIGKILL');
  await exited;
}

describe('sandbox run folders', () => {
  let parent: string;
  beforeEach(() => {
    parent = mkdtempSync(join(tmpdir(), 'agentry-run-folders-'));
  });
  afterEach(() => rmSync(parent, { recursive: true, force: true }));

  it('makes a folder of the process, searchable only, and removes it on close', async () => {
    const folders = await createRunFolders({ parent, logger });
    expect(folders.path.startsWith(join(parent, 'agentry-sandbox-runs-'))).toBe(true);
    expect(statSync(folders.path).mode & 0o777).toBe(0o711);
    expect(existsSync(join(folders.path, 'alive.sock'))).toBe(true);
    await folders.close();
    expect(existsSync(folders.path)).toBe(false);
  });

  it('removes only the folders no live process holds', async () => {
    const live = await createRunFolders({ parent, logger });
    try {
      const killed = join(parent, 'agentry-sandbox-runs-Killed');
      await killedHolder(killed);
      writeFileSync(join(killed, 'resolv.conf'), 'nameserver 127.0.0.1\n');
      // Killed before it listened: no socket, and older than a start takes.
      const silent = join(parent, 'agentry-sandbox-runs-Silent');
      mkdirSync(silent);
      utimesSync(silent, new Date(Date.now() - 120_000), new Date(Date.now() - 120_000));
      // Still starting: no socket yet, just made.
      const starting = join(parent, 'agentry-sandbox-runs-Starts');
      mkdirSync(starting);
      // Not folders of ours: a symlink and a file with such names, and a directory of another name.
      const target = join(parent, 'target');
      mkdirSync(target);
      symlinkSync(target, join(parent, 'agentry-sandbox-runs-Linked'));
      writeFileSync(join(parent, 'agentry-sandbox-runs-AFile1'), '');
      const other = join(parent, 'agentry-sandbox-Other1');
      mkdirSync(other);

      const removed = await sweepRunFolders(parent, logger);
      expect(removed.sort()).toEqual(['agentry-sandbox-runs-Killed', 'agentry-sandbox-runs-Silent']);
      expect(existsSync(killed)).toBe(false);
      expect(existsSync(silent)).toBe(false);
      for (const kept of [live.path, starting, target, join(parent, 'agentry-sandbox-runs-Linked'), other]) {
        expect(existsSync(kept), kept).toBe(true);
      }
    } finally {
      await live.close();
    }
  });

  it('sweeps when it starts', async () => {
    const killed = join(parent, 'agentry-sandbox-runs-Killed');
    await killedHolder(killed);
    const folders = await createRunFolders({ parent, logger });
    expect(existsSync(killed)).toBe(false);
    await folders.close();
  });
});
