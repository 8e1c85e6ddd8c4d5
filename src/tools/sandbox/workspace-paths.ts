/**
 * Resolving a path given by the model inside an agent's workspace, on the host, while the sandbox may be changing
 * the tree at the same moment. Every step is taken from an open directory descriptor (`/proc/self/fd/N/name`, which
 * is how `openat` is spelled from Node), never by re-walking a path string, so a directory swapped for a symlink
 * between two steps cannot lead outside. Symlinks are followed only while they stay inside the workspace: a
 * relative target is walked like any other path (`..` above the workspace is refused), an absolute target only
 * when it names the sandbox's own mount point (`/workspace/...`); anything else is refused.
 */

import type { Stats } from 'node:fs';
import { constants } from 'node:fs';
import { type FileHandle, lstat, mkdir, open, readlink, realpath } from 'node:fs/promises';
import { join } from 'node:path';
import { WorkspacePathError } from './sandbox-errors.ts';

/** Where the workspace is mounted inside the sandbox (and the commands' working directory and HOME). */
export const SANDBOX_WORKSPACE = '/workspace';

const MAX_PATH_LENGTH = 4096;
const MAX_NAME_BYTES = 255;
const MAX_SYMLINKS = 40;

/** Owner given to files and directories the host creates in a workspace, so the sandbox user can change them. */
export interface WorkspaceOwner {
  uid: number;
  gid: number;
}

function errnoCode(error: unknown): string | undefined {
  if (typeof error !== 'object' || error === null || !('code' in error)) return undefined;
  return typeof error.code === 'string' ? error.code : undefined;
}

/**
 * The segments of a path relative to the workspace root. Refuses (invalid_path) anything that is not a plain
 * relative path: absolute paths, NUL bytes, `..` segments, names longer than 255 bytes. `''` and `'.'` are the root.
 */
export function parseWorkspacePath(relative: string): string[] {
  const bad = (message: string) => new WorkspacePathError('invalid_path', relative, message);
  if (relative.length > MAX_PATH_LENGTH) throw bad(`path is longer than ${MAX_PATH_LENGTH} characters`);
  if (relative.includes('\0')) throw bad('path contains a NUL byte');
  if (relative.startsWith('/')) {
    throw bad(`path must be relative to the workspace (e.g. "src/main.py", not "${SANDBOX_WORKSPACE}/src/main.py")`);
  }
  const segments = relative.split('/').filter((segment) => segment !== '' && segment !== '.');
  for (const segment of segments) {
    if (segment === '..') throw bad('path must not contain ".." segments');
    if (Buffer.byteLength(segment) > MAX_NAME_BYTES) throw bad(`a path segment is longer than ${MAX_NAME_BYTES} bytes`);
  }
  return segments;
}

/** `/proc/self/fd/N/name`: `name` looked up in the directory open as N, like openat(N, name). */
export function atPath(directory: FileHandle, name?: string): string {
  return name === undefined ? `/proc/self/fd/${directory.fd}` : `/proc/self/fd/${directory.fd}/${name}`;
}

/** Where a walk ended: an open directory and, unless the path is that directory itself, a name in it. */
export interface WalkEnd {
  /** The directory holding `name`, or the target itself when `name` is null. */
  directory: FileHandle;
  name: string | null;
  /** The final entry's lstat (never a symlink), or null when it does not exist (or `name` is null). */
  stats: Stats | null;
  /** The canonical path relative to the workspace root, symlinks resolved. */
  segments: string[];
  /** Segments after the first missing directory (only when `allowMissing`); `name` is then the missing one. */
  missing: string[];
  close(): Promise<void>;
}

export interface WalkOptions {
  /** Create missing intermediate directories (mode 0755, given to `owner`). */
  createDirectories?: boolean;
  owner?: WorkspaceOwner | null | undefined;
  /** Return at the first missing intermediate directory instead of failing (for resolveWorkspacePath). */
  allowMissing?: boolean;
}

/**
 * Walks `segments` from the workspace root, following symlinks only while they stay inside, and returns the open
 * parent directory of the final entry. The final entry itself is not opened: callers open it with O_NOFOLLOW from
 * `directory`, so a symlink planted there after this check makes that open fail rather than lead anywhere.
 */
export async function walkWorkspace(root: string, relative: string, options: WalkOptions = {}): Promise<WalkEnd> {
  const queue = parseWorkspacePath(relative);
  const rootHandle = await open(root, constants.O_RDONLY | constants.O_DIRECTORY | constants.O_NOFOLLOW);
  const stack: { handle: FileHandle; name: string }[] = [{ handle: rootHandle, name: '' }];
  const closeAll = async () => {
    for (const entry of stack.splice(0)) await entry.handle.close().catch(() => undefined);
  };
  const fail = (code: WorkspacePathError['code'], message: string, cause?: unknown) =>
    new WorkspacePathError(code, relative, message, cause === undefined ? undefined : { cause });
  const top = () => {
    const last = stack.at(-1);
    if (last === undefined) throw fail('outside_workspace', 'the walk lost its directory');
    return last;
  };
  const canonical = () => stack.slice(1).map((entry) => entry.name);
  const end = async (name: string | null, stats: Stats | null, missing: string[] = []): Promise<WalkEnd> => {
    const segments = [...canonical(), ...(name === null ? [] : [name])];
    const directory = top().handle;
    // Every directory but the one returned is closed now; the returned one is closed by the caller.
    for (const entry of stack.splice(0, stack.length - 1)) await entry.handle.close().catch(() => undefined);
    return { directory, name, stats, segments, missing, close: () => directory.close() };
  };

  let symlinks = 0;
  let retries = 0;
  let created: string | null = null;
  try {
    while (queue.length > 0) {
      const name = queue.shift() ?? '';
      if (name === '' || name === '.') continue;
      if (name === '..') {
        if (stack.length === 1) throw fail('outside_workspace', 'path leads outside the workspace');
        await stack.pop()?.handle.close();
        continue;
      }
      const last = queue.length === 0;
      const at = atPath(top().handle, name);
      let stats: Stats;
      try {
        stats = await lstat(at);
      } catch (error) {
        if (errnoCode(error) !== 'ENOENT') throw error;
        if (last) return await end(name, null);
        if (options.allowMissing) return await end(name, null, queue.splice(0));
        if (!options.createDirectories)
          throw fail('not_found', `no such directory: ${[...canonical(), name].join('/')}`);
        try {
          await mkdir(at, 0o755);
          created = name;
        } catch (mkdirError) {
          if (errnoCode(mkdirError) !== 'EEXIST') throw mkdirError;
        }
        if (++retries > 100) throw fail('not_found', 'the directory keeps changing');
        queue.unshift(name);
        continue;
      }
      if (stats.isSymbolicLink()) {
        if (++symlinks > MAX_SYMLINKS) throw fail('symlink_loop', 'too many levels of symbolic links');
        const target = await readlink(at);
        if (target.startsWith('/')) {
          if (target !== SANDBOX_WORKSPACE && !target.startsWith(`${SANDBOX_WORKSPACE}/`)) {
            throw fail(
              'outside_workspace',
              `${[...canonical(), name].join('/')} is a symlink that leaves the workspace`,
            );
          }
          // An absolute link made inside the sandbox names the workspace by its mount point: restart at the root.
          while (stack.length > 1) await stack.pop()?.handle.close();
          queue.unshift(...target.slice(SANDBOX_WORKSPACE.length).split('/'));
        } else {
          queue.unshift(...target.split('/'));
        }
        continue;
      }
      if (last) return await end(name, stats);
      if (!stats.isDirectory()) throw fail('not_a_directory', `${[...canonical(), name].join('/')} is not a directory`);
      let handle: FileHandle;
      try {
        handle = await open(at, constants.O_RDONLY | constants.O_DIRECTORY | constants.O_NOFOLLOW);
      } catch (error) {
        // Replaced by a symlink or a file since the lstat: refuse rather than chase a moving tree.
        throw fail('outside_workspace', `${name} changed while the path was resolved`, error);
      }
      stack.push({ handle, name });
      if (created === name && options.owner) await handle.chown(options.owner.uid, options.owner.gid);
      created = null;
    }
    return await end(null, null);
  } catch (error) {
    await closeAll();
    if (error instanceof WorkspacePathError) throw error;
    if (errnoCode(error) === 'ENOENT') throw fail('not_found', 'no such file or directory', error);
    if (errnoCode(error) === 'ENOTDIR') throw fail('not_a_directory', 'a path segment is not a directory', error);
    if (errnoCode(error) === 'ELOOP') throw fail('outside_workspace', 'path changed while it was resolved', error);
    throw error;
  }
}

/**
 * Confirms that an open descriptor really is inside `root` (its path as the kernel reports it now). A second line of
 * defence behind the walk: it holds even if a step above were wrong.
 */
export async function assertInside(root: string, handle: FileHandle, relative: string): Promise<void> {
  const actual = await readlink(atPath(handle));
  if (actual !== root && !actual.startsWith(`${root}/`)) {
    throw new WorkspacePathError('outside_workspace', relative, 'path leads outside the workspace');
  }
}

/** The workspace root as the kernel names it (symlinks in the data directory's own path resolved). */
export async function canonicalRoot(root: string): Promise<string> {
  return realpath(root);
}

/**
 * The host path that `relative` names inside the workspace `root`, with symlinks inside the workspace resolved.
 * Refuses (WorkspacePathError) absolute paths, NUL, `..` and symlinks that leave the workspace. The answer is a
 * snapshot: the sandbox may change the tree afterwards, so to read or write use the workspace file functions,
 * which re-check while they open.
 */
export async function resolveWorkspacePath(root: string, relative: string): Promise<string> {
  const realRoot = await canonicalRoot(root);
  const walk = await walkWorkspace(realRoot, relative, { allowMissing: true });
  try {
    await assertInside(realRoot, walk.directory, relative);
    return join(realRoot, ...walk.segments, ...walk.missing);
  } finally {
    await walk.close();
  }
}
