import { spawnSync } from 'node:child_process';
import {
  chmodSync,
  linkSync,
  lstatSync,
  mkdirSync,
  mkdtempSync,
  rmSync,
  statSync,
  symlinkSync,
  truncateSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { createUsageThreads, walkWorkspaceTree } from './workspace-usage.ts';

let scratch: string;
let root: string;

beforeEach(() => {
  scratch = mkdtempSync(join(tmpdir(), 'agentry-usage-'));
  root = join(scratch, 'workspace');
  mkdirSync(root);
});
afterEach(() => rmSync(scratch, { recursive: true, force: true }));

/** `du`'s own count of allocated bytes, the independent measure the walk must agree with. */
function du(path: string): number {
  const result = spawnSync('du', ['-s', '--block-size=1', path], { encoding: 'utf8' });
  expect(result.status, result.stderr).toBe(0);
  return Number(result.stdout.split('\t')[0]);
}

describe('the workspace walk', () => {
  it('counts allocated bytes as du does: sparse files by their blocks, hard links once', async () => {
    mkdirSync(join(root, 'a/b/c'), { recursive: true });
    writeFileSync(join(root, 'a/one.bin'), Buffer.alloc(300_000, 1));
    writeFileSync(join(root, 'a/b/c/two.bin'), Buffer.alloc(70_000, 2));
    linkSync(join(root, 'a/one.bin'), join(root, 'a/b/again.bin'));
    writeFileSync(join(root, 'sparse'), '');
    truncateSync(join(root, 'sparse'), 50_000_000);
    symlinkSync('/etc/passwd', join(root, 'link'));
    const usage = walkWorkspaceTree(root);
    expect(usage).toMatchObject({ entries: 8, incomplete: null, stripped: [], reowned: 0 });
    expect(usage.bytes).toBe(du(root));
    expect(usage.bytes).toBeGreaterThan(370_000);
    expect(usage.bytes).toBeLessThan(1_000_000); // the sparse file's 50 MB are not allocated
    // On a thread of its own, the same answer.
    const threads = createUsageThreads();
    try {
      expect(await threads.walk(root)).toMatchObject({ bytes: usage.bytes, entries: 8 });
    } finally {
      await threads.close();
    }
  });

  it('stops at its bounds and says which', () => {
    for (let i = 0; i < 300; i++) writeFileSync(join(root, `f${i}`), '');
    mkdirSync(join(root, 'd1/d2/d3'), { recursive: true });
    expect(walkWorkspaceTree(root, { bounds: { maxEntries: 100, maxDepth: 10, timeoutMs: 60_000 } })).toMatchObject({
      entries: 100,
      incomplete: 'entries',
    });
    const shallow = walkWorkspaceTree(root, { bounds: { maxEntries: 1000, maxDepth: 2, timeoutMs: 60_000 } });
    expect(shallow).toMatchObject({ entries: 302, incomplete: 'depth' }); // d1 and d2 seen, d3 not
    expect(walkWorkspaceTree(root, { bounds: { maxEntries: 1000, maxDepth: 10, timeoutMs: 0 } }).incomplete).toBe(
      'time',
    );
    expect(walkWorkspaceTree(root).incomplete).toBeNull();
  });

  it('clears setuid and setgid bits inside, never through a symlink to a file outside', () => {
    const outside = join(scratch, 'outside-suid');
    writeFileSync(outside, '#!/bin/sh\n');
    chmodSync(outside, 0o4755);
    mkdirSync(join(root, 'bin'));
    writeFileSync(join(root, 'bin/suid'), '');
    chmodSync(join(root, 'bin/suid'), 0o4755);
    writeFileSync(join(root, 'sgid'), '');
    chmodSync(join(root, 'sgid'), 0o2710);
    writeFileSync(join(root, 'plain'), '');
    chmodSync(join(root, 'plain'), 0o1755);
    symlinkSync(outside, join(root, 'link'));
    // Positive control: the bits are there before the walk.
    expect(statSync(join(root, 'bin/suid')).mode & 0o7777).toBe(0o4755);

    const usage = walkWorkspaceTree(root, { stripSetId: true });
    expect(usage.stripped.sort()).toEqual(['bin/suid', 'sgid']);
    expect(statSync(join(root, 'bin/suid')).mode & 0o7777).toBe(0o755);
    expect(statSync(join(root, 'sgid')).mode & 0o7777).toBe(0o710);
    expect(statSync(join(root, 'plain')).mode & 0o7777).toBe(0o1755);
    expect(statSync(outside).mode & 0o7777).toBe(0o4755);
    // Without being asked, it only measures.
    chmodSync(join(root, 'sgid'), 0o2755);
    expect(walkWorkspaceTree(root).stripped).toEqual([]);
    expect(statSync(join(root, 'sgid')).mode & 0o7777).toBe(0o2755);
  });

  it.runIf(process.getuid?.() === 0)('gives every entry to an owner, symlinks themselves, not their targets', () => {
    const outside = join(scratch, 'outside');
    writeFileSync(outside, '');
    mkdirSync(join(root, 'd'));
    writeFileSync(join(root, 'd/f'), '');
    symlinkSync(outside, join(root, 'd/link'));
    const owner = { uid: 54_321, gid: 54_322 };
    const usage = walkWorkspaceTree(root, { owner });
    expect(usage.reowned).toBe(3);
    for (const path of ['d', 'd/f', 'd/link']) {
      expect(lstatSync(join(root, path)), path).toMatchObject(owner);
    }
    expect(lstatSync(outside)).toMatchObject({ uid: 0, gid: 0 });
    expect(walkWorkspaceTree(root, { owner }).reowned).toBe(0);
  });
});
