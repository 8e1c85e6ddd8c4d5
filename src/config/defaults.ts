/**
 * Defaults that src/config.ts offers for settings of lower modules, kept here so that config reads them without
 * importing the modules they configure (src/ARCHITECTURE.md: config sits below storage and the tools). Each module
 * that applies one imports it from here.
 */

export const MIB = 1024 * 1024;

/**
 * The size of the server's SQLite log (pages, about 10 MB) at which the checkpoint thread pauses the server's
 * connection briefly to start the log over; the connection's own `wal_autocheckpoint` is four times as much, as a
 * bound (SQLite's default is 1,000). AGENTRY_SQLITE_WAL_PAGES sets it. A larger log copies each often-written page
 * once per checkpoint instead of several times: measured under steady turns, 1,000 pages cost about a tenth of the
 * throughput, while 10,000 pages let the log reach 40 MB and the server's resident memory grow by as much.
 * Applied by storage/sqlite-checkpointer.ts.
 */
export const SERVER_AUTOCHECKPOINT_PAGES = 2500;

/** How often a read-only process probes for space by default (AGENTRY_STORAGE_PROBE_MS; storage/storage-space.ts). */
export const DEFAULT_STORAGE_PROBE_MS = 5000;

/** Above the ranges of regular users (1000-60000), systemd (to 65535) and container maps (to 1879048191). */
export const DEFAULT_UID_BASE = 2_000_000_000;
/** The highest identity given out: uids from 2^31 on break programs that keep them in a signed int. */
export const MAX_SANDBOX_UID = 2_147_483_646;

/** An organization's workspace quota unless AGENTRY_SANDBOX_WORKSPACE_QUOTA_MB says otherwise. */
export const DEFAULT_WORKSPACE_QUOTA_BYTES = 2048 * MIB;
