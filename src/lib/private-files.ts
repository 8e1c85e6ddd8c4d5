/**
 * What Agentry keeps on disk is its own: the data directory and its folders are 0700, the files in them (the SQLite
 * database with its -wal and -shm, secret.key, uploaded files) 0600, whatever the process umask. Modes are set
 * explicitly rather than through a process-wide umask, which would also reach sandboxed commands and the files the
 * sandbox layer writes for its user. The one exception is the data directory of a server running as root: its
 * sandboxes run as another user, who must search (x, never read) it to reach `workspaces/` (docs/sandbox.md).
 * Installs of versions that created files under the default umask (0644) are tightened at startup.
 */
import { chmodSync, closeSync, constants, fchmodSync, mkdirSync, openSync, readdirSync, statSync } from 'node:fs';
import { chmod, mkdir } from 'node:fs/promises';
import { dirname, join } from 'node:path';

export const PRIVATE_FILE_MODE = 0o600;
export const PRIVATE_DIR_MODE = 0o700;

/** 0700, or 0711 for a server running as root (its sandbox user must reach `workspaces/`). */
export function dataDirMode(): number {
  return process.getuid?.() === 0 ? 0o711 : PRIVATE_DIR_MODE;
}

const errorCode = (error: unknown): unknown =>
  typeof error === 'object' && error !== null && 'code' in error ? error.code : undefined;

/**
 * Creates a directory, and its missing parents, with exactly `mode`; an existing one is left as it is (startup
 * tightened it). One mkdir when it exists: cheap enough for every upload.
 */
export async function ensurePrivateDir(path: string, mode = PRIVATE_DIR_MODE): Promise<void> {
  try {
    await mkdir(path, { mode });
  } catch (error) {
    if (errorCode(error) === 'EEXIST') return;
    if (errorCode(error) !== 'ENOENT') throw error;
    await ensurePrivateDir(dirname(path), mode);
    return ensurePrivateDir(path, mode);
  }
  // The umask may have taken bits from `mode`.
  await chmod(path, mode);
}

/** Creates `path` as an empty file with mode 0600 if it does not exist (before a library opens it by name). */
export function createPrivateFile(path: string): void {
  let fd: number;
  try {
    fd = openSync(path, constants.O_CREAT | constants.O_EXCL | constants.O_WRONLY, PRIVATE_FILE_MODE);
  } catch (error) {
    if (errorCode(error) === 'EEXIST') return;
    throw error;
  }
  try {
    fchmodSync(fd, PRIVATE_FILE_MODE);
  } finally {
    closeSync(fd);
  }
}

/** The data directory's own files and folders that startup tightens (workspaces/ belong to the sandbox layer). */
const PRIVATE_FILES = ['agentry.db', 'agentry.db-wal', 'agentry.db-shm', 'agentry.db-journal', 'secret.key'];
const PRIVATE_DIRS = ['skill-repos'];
/** Uploaded files: its whole tree is walked once, while the folder itself is not yet private. */
const FILES_DIR = 'files';

/**
 * Creates the data directory (0700, 0711 as root) and takes group and other permissions away from what earlier
 * versions left readable in it. Returns what could not be done (e.g. a file owned by another user), for a
 * warning; a data directory that cannot be created is reported the same way (on SQLite, opening it fails next).
 */
export function prepareDataDir(dataDir: string): string[] {
  const problems: string[] = [];
  const attempt = (path: string, action: () => void) => {
    try {
      action();
    } catch (error) {
      if (errorCode(error) === 'ENOENT') return;
      problems.push(`${path}: ${error instanceof Error ? error.message : String(error)}`);
    }
  };
  const mode = dataDirMode();
  attempt(dataDir, () => {
    // Created now: exactly `mode`, whatever the umask; there already: only narrowed.
    if (mkdirSync(dataDir, { recursive: true }) !== undefined) chmodSync(dataDir, mode);
    else tighten(dataDir, mode);
  });
  for (const name of PRIVATE_FILES) attempt(join(dataDir, name), () => tighten(join(dataDir, name), PRIVATE_FILE_MODE));
  for (const name of PRIVATE_DIRS) attempt(join(dataDir, name), () => tighten(join(dataDir, name), PRIVATE_DIR_MODE));
  const files = join(dataDir, FILES_DIR);
  attempt(files, () => {
    if ((statSync(files).mode & 0o077) === 0) return;
    walk(files, attempt);
    // Last: a start interrupted before this walks again.
    tighten(files, PRIVATE_DIR_MODE);
  });
  return problems;
}

/** Removes the permission bits `allowed` does not have (never adds any). */
function tighten(path: string, allowed: number): void {
  const current = statSync(path).mode & 0o777;
  if ((current & ~allowed) !== 0) chmodSync(path, current & allowed);
}

function walk(directory: string, attempt: (path: string, action: () => void) => void): void {
  for (const entry of readdirSync(directory, { withFileTypes: true })) {
    const path = join(directory, entry.name);
    if (entry.isDirectory()) {
      attempt(path, () => {
        walk(path, attempt);
        tighten(path, PRIVATE_DIR_MODE);
      });
    } else if (entry.isFile()) {
      attempt(path, () => tighten(path, PRIVATE_FILE_MODE));
    }
  }
}
