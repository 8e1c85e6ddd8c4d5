import { spawn, spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeEach, describe, expect, it } from 'vitest';
import { WorkspacePathError } from './sandbox-errors.ts';
import { listWorkspaceFiles, readWorkspaceFile, writeWorkspaceFile } from './workspace-files.ts';
import { parseWorkspacePath, resolveWorkspacePath } from './workspace-paths.ts';

/** The error code a workspace call failed with, or "ok" when it did not fail. */
async function outcome(promise: Promise<unknown>): Promise<string> {
  try {
    await promise;
    return 'ok';
  } catch (error) {
    if (error instanceof WorkspacePathError) return error.code;
    throw error;
  }
}

const scratch = mkdtempSync(join(tmpdir(), 'agentry-workspace-test-'));
// A secret beside the workspace, as another agent's file or the data directory would be.
const outside = join(scratch, 'outside');
mkdirSync(outside);
writeFileSync(join(outside, 'secret.txt'), 'outside-secret');
let root: string;
let counter = 0;

beforeEach(() => {
  root = join(scratch, `ws${counter++}`);
  mkdirSync(root);
  writeFileSync(join(root, 'hello.txt'), 'hello');
  mkdirSync(join(root, 'src'));
  writeFileSync(join(root, 'src', 'main.py'), 'print(1)\n');
});
afterAll(() => rmSync(scratch, { recursive: true, force: true }));

describe('workspace path syntax', () => {
  it('accepts plain relative paths and refuses absolute, NUL, ".." and overlong ones', () => {
    expect(parseWorkspacePath('src/./main.py')).toEqual(['src', 'main.py']);
    expect(parseWorkspacePath('')).toEqual([]);
    expect(parseWorkspacePath('a//b/')).toEqual(['a', 'b']);
    for (const bad of ['/etc/passwd', '/workspace/x', '../x', 'a/../../x', 'a/..', 'x\0y', `${'a'.repeat(256)}`]) {
      expect(() => parseWorkspacePath(bad), JSON.stringify(bad)).toThrow(WorkspacePathError);
    }
  });

  it('resolves inside symlinks and refuses those that leave the workspace', async () => {
    symlinkSync('src', join(root, 'code'));
    symlinkSync('/workspace/src', join(root, 'absolute-inside'));
    symlinkSync('../outside', join(root, 'up'));
    symlinkSync(outside, join(root, 'absolute-outside'));
    expect(await resolveWorkspacePath(root, 'code/main.py')).toBe(join(root, 'src', 'main.py'));
    expect(await resolveWorkspacePath(root, 'absolute-inside/main.py')).toBe(join(root, 'src', 'main.py'));
    expect(await resolveWorkspacePath(root, 'new/dir/file.txt')).toBe(join(root, 'new', 'dir', 'file.txt'));
    expect(await outcome(resolveWorkspacePath(root, 'up/secret.txt'))).toBe('outside_workspace');
    expect(await outcome(resolveWorkspacePath(root, 'absolute-outside/secret.txt'))).toBe('outside_workspace');
    expect(await outcome(resolveWorkspacePath(root, '../outside/secret.txt'))).toBe('invalid_path');
  });
});

describe('reading workspace files', () => {
  it('reads a file, and a long one truncated', async () => {
    const file = await readWorkspaceFile(root, 'hello.txt');
    expect(file).toMatchObject({ path: 'hello.txt', size: 5, truncated: false });
    expect(file.content.toString()).toBe('hello');
    const cut = await readWorkspaceFile(root, 'hello.txt', { maxBytes: 3 });
    expect(cut).toMatchObject({ size: 5, truncated: true });
    expect(cut.content.toString()).toBe('hel');
  });

  it('never reads outside through a symlink: final component, intermediate directory, relative or absolute', async () => {
    symlinkSync(join(outside, 'secret.txt'), join(root, 'final-link'));
    symlinkSync(outside, join(root, 'dir-link'));
    symlinkSync('../../../../../../../../../../etc', join(root, 'etc-link'));
    symlinkSync('loop', join(root, 'loop'));
    expect(await outcome(readWorkspaceFile(root, 'final-link'))).toBe('outside_workspace');
    expect(await outcome(readWorkspaceFile(root, 'dir-link/secret.txt'))).toBe('outside_workspace');
    expect(await outcome(readWorkspaceFile(root, 'etc-link/passwd'))).toBe('outside_workspace');
    expect(await outcome(readWorkspaceFile(root, 'loop'))).toBe('symlink_loop');
    // The positive case: the same file is readable by the host, so only the guard stands in the way.
    expect(readFileSync(join(root, 'dir-link', 'secret.txt'), 'utf8')).toBe('outside-secret');
  });

  it('refuses directories, FIFOs and missing files without blocking', async () => {
    spawnSync('mkfifo', [join(root, 'pipe')]);
    expect(existsSync(join(root, 'pipe'))).toBe(true);
    expect(await outcome(readWorkspaceFile(root, 'pipe'))).toBe('not_a_file');
    expect(await outcome(writeWorkspaceFile(root, 'pipe', 'x'))).toBe('not_a_file');
    expect(await outcome(readWorkspaceFile(root, 'src'))).toBe('not_a_file');
    expect(await outcome(readWorkspaceFile(root, ''))).toBe('not_a_file');
    expect(await outcome(readWorkspaceFile(root, 'missing.txt'))).toBe('not_found');
    expect(await outcome(readWorkspaceFile(root, 'hello.txt/x'))).toBe('not_a_directory');
  });

  it('holds while the tree is swapped between a directory and an escaping symlink', async () => {
    mkdirSync(join(root, 'real'));
    writeFileSync(join(root, 'real', 'secret.txt'), 'inside');
    // Flip `d` between the real directory and a symlink to the outside as fast as a shell can.
    const swapper = spawn(
      'bash',
      ['-c', 'cd "$1" && for ((i = 0; i < 100000; i++)); do ln -sfn real d; ln -sfn ../outside d; done', 'swap', root],
      { stdio: 'ignore' },
    );
    const seen = new Map<string, number>();
    const until = Date.now() + 1500;
    try {
      while (Date.now() < until) {
        const result = await readWorkspaceFile(root, 'd/secret.txt').then(
          (file) => file.content.toString(),
          (error: unknown) => (error instanceof WorkspacePathError ? error.code : String(error)),
        );
        seen.set(result, (seen.get(result) ?? 0) + 1);
      }
    } finally {
      swapper.kill('SIGKILL');
    }
    expect(seen.has('outside-secret')).toBe(false);
    expect([...seen.keys()].every((key) => ['inside', 'outside_workspace', 'not_found'].includes(key))).toBe(true);
    // Both sides of the race were met, so the check above saw the attack.
    expect(seen.get('inside') ?? 0).toBeGreaterThan(0);
    expect(seen.get('outside_workspace') ?? 0).toBeGreaterThan(0);
  });
});

describe('writing workspace files', () => {
  it('creates directories and files, replaces files, and caps the size', async () => {
    expect(await writeWorkspaceFile(root, 'a/b/c.txt', 'one')).toEqual({
      path: 'a/b/c.txt',
      bytes: 3,
      created: true,
      grew: 3,
    });
    expect(readFileSync(join(root, 'a', 'b', 'c.txt'), 'utf8')).toBe('one');
    expect(await writeWorkspaceFile(root, 'a/b/c.txt', 'two!')).toMatchObject({ created: false, bytes: 4 });
    expect(readFileSync(join(root, 'a', 'b', 'c.txt'), 'utf8')).toBe('two!');
    expect(await outcome(writeWorkspaceFile(root, 'big.txt', 'x'.repeat(11), { maxBytes: 10 }))).toBe('too_large');
    expect(existsSync(join(root, 'big.txt'))).toBe(false);
    expect(await outcome(writeWorkspaceFile(root, '', 'x'))).toBe('invalid_path');
  });

  it('refuses a write that would take the workspace past its quota, counting what it replaces', async () => {
    const quota = (usedBytes: number) => ({ quota: { quotaBytes: 100_000, usedBytes } });
    expect(await writeWorkspaceFile(root, 'a.bin', Buffer.alloc(40_000), quota(50_000))).toMatchObject({
      grew: 40_000,
    });
    const refused = writeWorkspaceFile(root, 'b.bin', Buffer.alloc(20_000), quota(90_000));
    await expect(refused).rejects.toMatchObject({ code: 'quota_exceeded' });
    await expect(writeWorkspaceFile(root, 'b.bin', 'x', quota(90_000))).resolves.toMatchObject({ grew: 1 });
    expect(existsSync(join(root, 'b.bin'))).toBe(true);
    // Replacing a 40 KB file with 45 KB grows the workspace by about 5 KB only.
    const replaced = await writeWorkspaceFile(root, 'a.bin', Buffer.alloc(45_000), quota(95_000));
    expect(replaced.grew).toBeLessThan(5_000);
    // Full (or unmeasurable): only writes that do not grow it pass.
    await expect(writeWorkspaceFile(root, 'c.bin', 'x', quota(Number.POSITIVE_INFINITY))).rejects.toMatchObject({
      code: 'quota_exceeded',
    });
    await expect(writeWorkspaceFile(root, 'a.bin', 'smaller', quota(Number.POSITIVE_INFINITY))).resolves.toMatchObject({
      created: false,
    });
  });

  it('never creates or truncates anything outside', async () => {
    symlinkSync(outside, join(root, 'dir-link'));
    symlinkSync(join(outside, 'secret.txt'), join(root, 'file-link'));
    expect(await outcome(writeWorkspaceFile(root, 'dir-link/new.txt', 'pwned'))).toBe('outside_workspace');
    expect(await outcome(writeWorkspaceFile(root, 'dir-link/sub/new.txt', 'pwned'))).toBe('outside_workspace');
    expect(await outcome(writeWorkspaceFile(root, 'file-link', 'pwned'))).toBe('outside_workspace');
    expect(await outcome(writeWorkspaceFile(root, '../outside/new.txt', 'pwned'))).toBe('invalid_path');
    expect(existsSync(join(outside, 'new.txt'))).toBe(false);
    expect(existsSync(join(outside, 'sub'))).toBe(false);
    expect(readFileSync(join(outside, 'secret.txt'), 'utf8')).toBe('outside-secret');
  });

  it('follows a symlink that stays inside', async () => {
    symlinkSync('src', join(root, 'code'));
    expect(await writeWorkspaceFile(root, 'code/new.py', 'x')).toMatchObject({ path: 'src/new.py' });
    expect(readFileSync(join(root, 'src', 'new.py'), 'utf8')).toBe('x');
  });
});

describe('listing workspace files', () => {
  it('lists sorted entries with types and sizes, to the depth asked, without following symlinks', async () => {
    symlinkSync(outside, join(root, 'dir-link'));
    const top = await listWorkspaceFiles(root);
    expect(top).toEqual({
      path: '',
      truncated: false,
      entries: [
        { path: 'dir-link', type: 'symlink', size: 0, target: outside },
        { path: 'hello.txt', type: 'file', size: 5 },
        { path: 'src', type: 'directory', size: 0 },
      ],
    });
    const deep = await listWorkspaceFiles(root, '', { maxDepth: 2 });
    expect(deep.entries.map((entry) => entry.path)).toEqual(['dir-link', 'hello.txt', 'src', 'src/main.py']);
    expect((await listWorkspaceFiles(root, 'src')).entries).toEqual([{ path: 'src/main.py', type: 'file', size: 9 }]);
    const capped = await listWorkspaceFiles(root, '', { maxEntries: 2 });
    expect(capped).toMatchObject({ truncated: true, entries: [{ path: 'dir-link' }, { path: 'hello.txt' }] });
  });

  it('refuses to list outside or a file', async () => {
    symlinkSync(outside, join(root, 'dir-link'));
    expect(await outcome(listWorkspaceFiles(root, 'dir-link'))).toBe('outside_workspace');
    expect(await outcome(listWorkspaceFiles(root, 'hello.txt'))).toBe('not_a_directory');
    expect(await outcome(listWorkspaceFiles(root, 'nope'))).toBe('not_found');
  });
});
