/**
 * The host side of the file tools: read, write and list inside one agent's workspace. These run in the server
 * process (often as a more privileged user than the sandbox), so every open goes through the descriptor-anchored
 * walk of workspace-paths.ts with O_NOFOLLOW on the final entry, only regular files are opened (never a FIFO or
 * device that could block or have side effects), reads and listings are capped, and each opened descriptor is
 * checked to lie inside the workspace before it is used.
 */
import { constants, type Stats } from 'node:fs';
import { type FileHandle, lstat, open, readdir, readlink } from 'node:fs/promises';
import { WorkspacePathError } from './sandbox-errors.ts';
import {
  assertInside,
  atPath,
  canonicalRoot,
  parseWorkspacePath,
  type WorkspaceOwner,
  walkWorkspace,
} from './workspace-paths.ts';

export const DEFAULT_READ_BYTES = 1024 * 1024;
export const DEFAULT_WRITE_BYTES = 10 * 1024 * 1024;
export const DEFAULT_LIST_ENTRIES = 1000;

export interface WorkspaceFile {
  /** Canonical path relative to the workspace (symlinks inside it resolved). */
  path: string;
  /** Size of the file on disk. */
  size: number;
  /** At most `maxBytes` bytes from the start of the file. */
  content: Buffer;
  truncated: boolean;
}

function notAFile(relative: string, stats: Stats): WorkspacePathError {
  const kind = stats.isDirectory() ? 'a directory' : 'not a regular file';
  return new WorkspacePathError('not_a_file', relative, `${relative} is ${kind}`);
}

/** Opens the final entry of a walk with `flags` plus O_NOFOLLOW, and checks where the descriptor landed. */
async function openFinal(
  root: string,
  relative: string,
  directory: FileHandle,
  name: string,
  flags: number,
  mode?: number,
): Promise<FileHandle> {
  let handle: FileHandle;
  try {
    handle = await open(atPath(directory, name), flags | constants.O_NOFOLLOW | constants.O_NONBLOCK, mode);
  } catch (error) {
    const code = typeof error === 'object' && error !== null && 'code' in error ? error.code : undefined;
    if (code === 'ELOOP')
      throw new WorkspacePathError('outside_workspace', relative, `${relative} changed while it was opened`);
    if (code === 'ENOENT') throw new WorkspacePathError('not_found', relative, `no such file: ${relative}`);
    if (code === 'EISDIR') throw new WorkspacePathError('not_a_file', relative, `${relative} is a directory`);
    if (code === 'ENXIO') throw new WorkspacePathError('not_a_file', relative, `${relative} is not a regular file`);
    throw error;
  }
  try {
    const stats = await handle.stat();
    if (!stats.isFile()) throw notAFile(relative, stats);
    await assertInside(root, handle, relative);
    return handle;
  } catch (error) {
    await handle.close();
    throw error;
  }
}

/** Reads up to `maxBytes` of a regular file in the workspace (a longer file comes back truncated). */
export async function readWorkspaceFile(
  root: string,
  relative: string,
  options: { maxBytes?: number } = {},
): Promise<WorkspaceFile> {
  const maxBytes = options.maxBytes ?? DEFAULT_READ_BYTES;
  const realRoot = await canonicalRoot(root);
  if (parseWorkspacePath(relative).length === 0) {
    throw new WorkspacePathError('not_a_file', relative, 'the workspace root is a directory');
  }
  const walk = await walkWorkspace(realRoot, relative);
  try {
    const { name, stats } = walk;
    if (name === null) throw new WorkspacePathError('not_a_file', relative, `${relative} is a directory`);
    if (stats === null) throw new WorkspacePathError('not_found', relative, `no such file: ${relative}`);
    if (!stats.isFile()) throw notAFile(relative, stats);
    const handle = await openFinal(realRoot, relative, walk.directory, name, constants.O_RDONLY);
    try {
      const { size } = await handle.stat();
      const buffer = Buffer.alloc(Math.min(size, maxBytes) + 1);
      let filled = 0;
      // The file may grow while it is read: stop at maxBytes + 1 (one byte more says "truncated").
      while (filled < buffer.length) {
        const { bytesRead } = await handle.read(buffer, filled, buffer.length - filled, filled);
        if (bytesRead === 0) break;
        filled += bytesRead;
      }
      const truncated = filled > maxBytes || size > maxBytes;
      return {
        path: walk.segments.join('/'),
        size,
        content: buffer.subarray(0, Math.min(filled, maxBytes)),
        truncated,
      };
    } finally {
      await handle.close();
    }
  } finally {
    await walk.close();
  }
}

export interface WriteOptions {
  /** Largest content accepted (default 10 MiB); larger content is refused (`too_large`), nothing is written. */
  maxBytes?: number;
  /** Owner of created files and directories: the sandbox user, when the server runs as another user. */
  owner?: WorkspaceOwner | null;
  /** The workspace's quota and use: a write that would grow it past the quota is refused (`quota_exceeded`). */
  quota?: { quotaBytes: number; usedBytes: number };
}

const MIB = 1024 * 1024;
const mib = (bytes: number) => `${(bytes / MIB).toFixed(1)} MiB`;

/** Writes (creates or replaces) a regular file in the workspace, creating missing directories. */
export async function writeWorkspaceFile(
  root: string,
  relative: string,
  content: string | Uint8Array,
  options: WriteOptions = {},
): Promise<{ path: string; bytes: number; created: boolean; grew: number }> {
  const bytes = typeof content === 'string' ? Buffer.from(content, 'utf8') : content;
  const maxBytes = options.maxBytes ?? DEFAULT_WRITE_BYTES;
  if (parseWorkspacePath(relative).length === 0) {
    throw new WorkspacePathError('invalid_path', relative, 'a file name is needed');
  }
  if (bytes.byteLength > maxBytes) {
    throw new WorkspacePathError(
      'too_large',
      relative,
      `content is ${bytes.byteLength} bytes; the limit is ${maxBytes}`,
    );
  }
  const realRoot = await canonicalRoot(root);
  const walk = await walkWorkspace(realRoot, relative, { createDirectories: true, owner: options.owner });
  try {
    const { name, stats } = walk;
    if (name === null) throw new WorkspacePathError('not_a_file', relative, `${relative} is a directory`);
    if (stats !== null && !stats.isFile()) throw notAFile(relative, stats);
    // What the workspace grows by: the new content, less the blocks of the file it replaces.
    const grew = bytes.byteLength - (stats === null ? 0 : stats.blocks * 512);
    const { quota } = options;
    if (quota && grew > 0 && quota.usedBytes + grew > quota.quotaBytes) {
      const used = Number.isFinite(quota.usedBytes) ? `${mib(quota.usedBytes)} in use` : 'too many files to measure';
      throw new WorkspacePathError(
        'quota_exceeded',
        relative,
        `the workspace is full: writing ${bytes.byteLength} bytes to ${relative} would take it past its disk quota of ${mib(quota.quotaBytes)} (${used}); delete files with sandbox_run to make room`,
      );
    }
    const handle = await openFinal(
      realRoot,
      relative,
      walk.directory,
      name,
      constants.O_WRONLY | constants.O_CREAT | constants.O_TRUNC,
      0o644,
    );
    try {
      await handle.writeFile(bytes);
      if (options.owner) await handle.chown(options.owner.uid, options.owner.gid);
    } finally {
      await handle.close();
    }
    return { path: walk.segments.join('/'), bytes: bytes.byteLength, created: stats === null, grew };
  } finally {
    await walk.close();
  }
}

export type WorkspaceEntryType = 'file' | 'directory' | 'symlink' | 'other';

export interface WorkspaceEntry {
  /** Relative to the workspace root. */
  path: string;
  type: WorkspaceEntryType;
  /** Bytes, for files; 0 otherwise. */
  size: number;
  /** Where a symlink points (as written; it is not followed). */
  target?: string;
}

export interface ListOptions {
  /** Stop after this many entries (default 1000); `truncated` says so. */
  maxEntries?: number;
  /** 1 lists the directory itself; 2 also its subdirectories, and so on (default 1). Symlinks are never entered. */
  maxDepth?: number;
}

function entryType(stats: Stats): WorkspaceEntryType {
  if (stats.isSymbolicLink()) return 'symlink';
  if (stats.isDirectory()) return 'directory';
  return stats.isFile() ? 'file' : 'other';
}

/** Lists a directory of the workspace (default its root), sorted by name, depth-first, capped. */
export async function listWorkspaceFiles(
  root: string,
  relative = '',
  options: ListOptions = {},
): Promise<{ path: string; entries: WorkspaceEntry[]; truncated: boolean }> {
  const maxEntries = options.maxEntries ?? DEFAULT_LIST_ENTRIES;
  const maxDepth = options.maxDepth ?? 1;
  const realRoot = await canonicalRoot(root);
  const walk = await walkWorkspace(realRoot, relative);
  let start: FileHandle;
  try {
    if (walk.name === null) {
      start = walk.directory;
    } else {
      if (walk.stats === null) throw new WorkspacePathError('not_found', relative, `no such directory: ${relative}`);
      if (!walk.stats.isDirectory()) {
        throw new WorkspacePathError('not_a_directory', relative, `${relative} is not a directory`);
      }
      start = await open(
        atPath(walk.directory, walk.name),
        constants.O_RDONLY | constants.O_DIRECTORY | constants.O_NOFOLLOW,
      );
      await walk.close();
    }
  } catch (error) {
    await walk.close();
    throw error;
  }
  const base = walk.segments.join('/');
  const entries: WorkspaceEntry[] = [];
  let truncated = false;

  async function visit(directory: FileHandle, prefix: string, depth: number): Promise<void> {
    await assertInside(realRoot, directory, relative);
    const names = (await readdir(atPath(directory))).sort();
    for (const name of names) {
      if (entries.length >= maxEntries) {
        truncated = true;
        return;
      }
      const at = atPath(directory, name);
      let stats: Stats;
      try {
        stats = await lstat(at);
      } catch {
        continue; // removed while listing
      }
      const path = prefix === '' ? name : `${prefix}/${name}`;
      const type = entryType(stats);
      const entry: WorkspaceEntry = { path, type, size: type === 'file' ? stats.size : 0 };
      if (type === 'symlink') entry.target = await readlink(at).catch(() => '');
      entries.push(entry);
      if (type === 'directory' && depth < maxDepth) {
        let child: FileHandle;
        try {
          child = await open(at, constants.O_RDONLY | constants.O_DIRECTORY | constants.O_NOFOLLOW);
        } catch {
          continue; // replaced (e.g. by a symlink) while listing: not entered
        }
        try {
          await visit(child, path, depth + 1);
        } finally {
          await child.close();
        }
      }
    }
  }

  try {
    await visit(start, base, 1);
  } finally {
    await start.close();
  }
  return { path: base, entries, truncated };
}
