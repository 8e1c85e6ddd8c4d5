/**
 * Where this process's sandbox runs keep their per-run directories (synthetic /etc files, the seccomp filter, the
 * egress proxy's socket): one folder of the process's own, `<tmp>/agentry-sandbox-runs-XXXXXX/`. A run removes its
 * directory when it ends, and a graceful shutdown removes the folder; a process killed with kill -9 cannot, so each
 * process, when it starts, removes the folders that no live process holds.
 *
 * Whether a folder is held is asked of the folder itself: its process listens on a Unix socket in it
 * (`alive.sock`), and the kernel closes that socket when the process dies, however it dies. A connection refused
 * means the process is gone. This holds whatever the process ids say (several servers and cluster workers on one
 * machine, containers sharing /tmp with pid namespaces of their own, pids reused after a reboot), and a folder
 * that cannot be judged (another user's, an unexpected error) is left alone.
 */
import { chmod, lstat, mkdtemp, readdir, rm } from 'node:fs/promises';
import { connect, createServer, type Server } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Logger } from 'pino';

export const RUN_FOLDER_PREFIX = 'agentry-sandbox-runs-';
const RUN_FOLDER = /^agentry-sandbox-runs-[A-Za-z0-9]{6}$/;
const ALIVE_SOCKET = 'alive.sock';
/**
 * A folder without its socket is a process killed between making the folder and listening in it, or one still
 * starting: only the first is ever this old.
 */
const STARTING_MS = 60_000;
/** A connection to a live process's socket is accepted (or queued) at once; waiting longer than this is odd. */
const PROBE_TIMEOUT_MS = 2000;

export interface RunFolders {
  /** This process's folder, where per-run directories are made. */
  readonly path: string;
  /** Removes the folder and stops listening (once no run uses it). */
  close(): Promise<void>;
}

export interface RunFoldersOptions {
  /** Where the folders are (default the OS temp directory). */
  parent?: string | undefined;
  logger: Logger;
}

type Holder = 'alive' | 'gone' | 'unknown';

/** Whether a live process holds the folder at `path`, asked by connecting to the socket it listens on. */
function holder(path: string): Promise<Holder> {
  return new Promise((resolve) => {
    const socket = connect(join(path, ALIVE_SOCKET));
    const done = (answer: Holder) => {
      clearTimeout(timer);
      socket.destroy();
      resolve(answer);
    };
    const timer = setTimeout(() => done('unknown'), PROBE_TIMEOUT_MS);
    socket.once('connect', () => done('alive'));
    // Refused: a socket file no process listens on. Anything else (no socket yet, not ours to open) is not proof.
    socket.once('error', (error: NodeJS.ErrnoException) => done(error.code === 'ECONNREFUSED' ? 'gone' : 'unknown'));
  });
}

/** Removes the folders under `parent` that no live process holds; returns their names. */
export async function sweepRunFolders(parent: string, logger: Logger): Promise<string[]> {
  const names = await readdir(parent).catch(() => []);
  const removed: string[] = [];
  const uid = process.getuid?.();
  for (const name of names) {
    if (!RUN_FOLDER.test(name)) continue;
    const path = join(parent, name);
    const stats = await lstat(path).catch(() => null);
    // Only real directories of this user: never a symlink planted in a shared /tmp, never another user's folder.
    if (stats === null || !stats.isDirectory() || (uid !== undefined && stats.uid !== uid)) continue;
    let answer = await holder(path);
    if (answer === 'unknown') {
      const socket = await lstat(join(path, ALIVE_SOCKET)).catch(() => null);
      if (socket === null && Date.now() - stats.mtimeMs > STARTING_MS) answer = 'gone';
    }
    if (answer !== 'gone') continue;
    try {
      await rm(path, { recursive: true, force: true });
      removed.push(name);
    } catch (error) {
      logger.warn({ err: error, path }, `could not remove the sandbox run folder ${path} of a process that is gone`);
    }
  }
  return removed;
}

/**
 * Removes what killed processes left, then makes this process's folder (searchable by the sandbox users, 0711,
 * like the run directories in it) and listens in it. Without a socket to listen on (a temp directory path too long
 * for one), runs fall back to the parent directory itself, as before folders of their own: nothing is removed
 * then but each run's own directory.
 */
export async function createRunFolders(options: RunFoldersOptions): Promise<RunFolders> {
  const { logger } = options;
  const parent = options.parent ?? tmpdir();
  const removed = await sweepRunFolders(parent, logger);
  if (removed.length > 0) {
    logger.info(
      { parent, folders: removed },
      `removed ${removed.length} sandbox run folder${removed.length === 1 ? '' : 's'} left in ${parent} by processes that are gone`,
    );
  }
  const path = await mkdtemp(join(parent, RUN_FOLDER_PREFIX));
  let server: Server;
  try {
    await chmod(path, 0o711);
    server = await listen(join(path, ALIVE_SOCKET));
    server.on('error', (error) => logger.warn({ err: error, path }, 'the sandbox run folder socket failed'));
  } catch (error) {
    await rm(path, { recursive: true, force: true });
    logger.warn(
      { err: error, parent },
      `sandbox runs use ${parent} directly: no folder of this process could be made there (runs interrupted by a kill leave their directories behind)`,
    );
    return { path: parent, close: async () => undefined };
  }
  return {
    path,
    async close() {
      await new Promise<void>((resolve) => server.close(() => resolve()));
      await rm(path, { recursive: true, force: true });
    },
  };
}

function listen(socketPath: string): Promise<Server> {
  return new Promise((resolve, reject) => {
    // Connections are only ever probes: a live process answers by accepting them.
    const server = createServer((socket) => socket.destroy());
    server.once('error', reject);
    server.listen(socketPath, () => {
      server.off('error', reject);
      // Listening must not keep a process alive that has nothing else to do.
      server.unref();
      resolve(server);
    });
  });
}
