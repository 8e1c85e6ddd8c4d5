/**
 * A small pool of MCP connections, one per key (e.g. a connector id), shared by every call that needs that
 * server: concurrent `get`s for one key share one connect, a connection whose transport went away is replaced
 * on the next `get` (using the protocol that worked as the hint), and a changed endpoint (URL or headers) gets
 * a fresh connection (so does a change of the declared `sampling` capability). `onToolsChanged(key, …)` listeners
 * and the key's `watch`er outlive reconnects: they are attached to every connection the pool opens for the key,
 * and told "changed" when a key is reconnected after a failure, since its tools may have changed meanwhile.
 * Header values stay secret: only a hash of the endpoint is kept to compare endpoints.
 *
 * A connection nobody has used for `idleCloseMs` (no call in progress) is closed and forgotten: the next `get`
 * connects again. So a pool keyed by connector and credential (one connection per end user of an OAuth connector)
 * keeps only what is in use, and a server is not held open by a connector that changed its URL or was deleted in
 * another process. `evictPrefix` closes a deleted connector's connections at once in this process.
 */
import { createHash } from 'node:crypto';
import { connectMcp, type McpClientOptions, type McpConnection, type McpEndpoint, type McpProtocol } from './client.ts';
import { McpError } from './errors.ts';

export interface McpPoolOptions extends McpClientOptions {
  /** A connection with no call in progress for this long is closed (default 5 min; 0 keeps them open). */
  idleCloseMs?: number | undefined;
}

export interface McpPool {
  /** The live connection for `key`, connecting (or reconnecting) when needed. `prefer` is the stored hint. */
  get(key: string, endpoint: McpEndpoint, prefer?: McpProtocol, signal?: AbortSignal): Promise<McpConnection>;
  /** The protocol the key's last connection negotiated, to persist as the next `prefer`. */
  protocolOf(key: string): McpProtocol | undefined;
  /** Listens for tool-list changes of `key` across reconnects; returns the unsubscribe function. */
  onToolsChanged(key: string, listener: () => void): () => void;
  /**
   * Sets the key's watcher of tool-list changes (replacing the one before): kept across reconnects, dropped with
   * the key's connection when it is closed idle or evicted, so a caller sets it again with each `get`.
   */
  watch(key: string, listener: () => void): void;
  /** Closes and forgets the key's connection. */
  evict(key: string): Promise<void>;
  /** Closes and forgets the connections of every key that starts with `prefix` (a deleted connector's). */
  evictPrefix(prefix: string): Promise<void>;
  /** Closes every connection; later `get`s reject. */
  close(): Promise<void>;
}

interface Entry {
  fingerprint: string;
  pending: Promise<McpConnection>;
  connection?: McpConnection;
  detach?: () => void;
  usage: Usage;
}

/** Calls in progress on a connection, and when the last one started or ended (or the last `get` of it). */
interface Usage {
  active: number;
  usedAt: number;
  /** Set when the pool let go of the connection while calls were in progress: closes it after the last one. */
  retired?: () => void;
}

const DEFAULT_IDLE_CLOSE_MS = 5 * 60_000;
/** Keys whose negotiated protocol is remembered (the hint for their next connect). */
const MAX_PROTOCOL_HINTS = 10_000;

/** The connection as the pool hands it out: each call counts as use of the entry while it runs. */
function tracked(connection: McpConnection, usage: Usage): McpConnection {
  const use = async <T>(call: () => Promise<T>): Promise<T> => {
    usage.active++;
    usage.usedAt = performance.now();
    try {
      return await call();
    } finally {
      usage.active--;
      usage.usedAt = performance.now();
      if (usage.active === 0) usage.retired?.();
    }
  };
  return {
    get protocol() {
      return connection.protocol;
    },
    get capabilities() {
      return connection.capabilities;
    },
    get closed() {
      return connection.closed;
    },
    listResources: (cursor, signal) => use(() => connection.listResources(cursor, signal)),
    readResource: (uri, signal) => use(() => connection.readResource(uri, signal)),
    listPrompts: (cursor, signal) => use(() => connection.listPrompts(cursor, signal)),
    getPrompt: (name, args, signal) => use(() => connection.getPrompt(name, args, signal)),
    listTools: (signal) => use(() => connection.listTools(signal)),
    callTool: (name, args, options) => use(() => connection.callTool(name, args, options)),
    onToolsChanged: (listener) => connection.onToolsChanged(listener),
    close: () => connection.close(),
  };
}

function fingerprintOf(endpoint: McpEndpoint): string {
  const headers = Object.entries(endpoint.headers)
    .map(([name, value]) => [name.toLowerCase(), value])
    .sort(([a = ''], [b = '']) => (a < b ? -1 : a > b ? 1 : 0));
  return createHash('sha256')
    .update(JSON.stringify([endpoint.url, headers, endpoint.sampling === true]))
    .digest('hex');
}

export function createMcpPool(options: McpPoolOptions): McpPool {
  const { idleCloseMs = DEFAULT_IDLE_CLOSE_MS, ...clientOptions } = options;
  const entries = new Map<string, Entry>();
  const protocols = new Map<string, McpProtocol>();
  const listeners = new Map<string, Set<() => void>>();
  const watchers = new Map<string, () => void>();
  /** Connections let go of while calls were in progress on them (closed at once if the pool closes first). */
  const retiring = new Set<Entry>();
  let closed = false;

  const notify = (key: string) => {
    const watcher = watchers.get(key);
    for (const listener of [...(listeners.get(key) ?? []), ...(watcher === undefined ? [] : [watcher])]) {
      try {
        listener();
      } catch (error) {
        options.logger?.warn({ err: String(error) }, 'mcp: tools-changed listener failed');
      }
    }
  };

  /** Listens on the key's connection only while someone listens on the key (2026-07-28 opens a stream for it). */
  const attach = (key: string, entry: Entry) => {
    if (entry.connection === undefined || entry.detach !== undefined) return;
    if ((listeners.get(key)?.size ?? 0) === 0 && !watchers.has(key)) return;
    entry.detach = entry.connection.onToolsChanged(() => notify(key));
  };

  /**
   * Stops listening on a connection the pool no longer hands out and closes it (once connected): at once when the
   * pool closes, else once the calls in progress on it have ended (a changed header does not cut a long call off).
   */
  const retire = (entry: Entry, atOnce = false): Promise<void> => {
    entry.detach?.();
    const close = (connection: McpConnection) => connection.close().catch(() => undefined);
    return entry.pending.then(
      (connection) =>
        atOnce || entry.usage.active === 0
          ? close(connection)
          : new Promise<void>((resolve) => {
              retiring.add(entry);
              entry.usage.retired = () => {
                retiring.delete(entry);
                resolve(close(connection));
              };
            }),
      () => undefined,
    );
  };

  /** Forgets the key's entry and its watcher, and retires its connection. */
  const forget = async (key: string): Promise<void> => {
    const entry = entries.get(key);
    entries.delete(key);
    watchers.delete(key);
    if (entry !== undefined) await retire(entry);
  };

  let sweeper: NodeJS.Timeout | undefined;
  const sweep = () => {
    const now = performance.now();
    for (const [key, entry] of entries) {
      const { active, usedAt } = entry.usage;
      if (entry.connection === undefined || active > 0 || now - usedAt < idleCloseMs) continue;
      options.logger?.debug({ key }, 'mcp: closing an idle connection');
      void forget(key);
    }
    if (entries.size === 0) {
      clearInterval(sweeper);
      sweeper = undefined;
    }
  };
  const startSweeping = () => {
    if (sweeper !== undefined || idleCloseMs <= 0 || closed) return;
    sweeper = setInterval(sweep, Math.max(100, Math.min(idleCloseMs / 2, 60_000)));
    sweeper.unref();
  };

  const open = (
    key: string,
    endpoint: McpEndpoint,
    fingerprint: string,
    prefer: McpProtocol | undefined,
    signal?: AbortSignal,
  ) => {
    const usage: Usage = { active: 0, usedAt: performance.now() };
    const pending = connectMcp(endpoint, { ...clientOptions, prefer, signal }).then((raw) => tracked(raw, usage));
    const entry: Entry = { fingerprint, pending, usage };
    entries.set(key, entry);
    startSweeping();
    return pending.then(
      (connection) => {
        if (entries.get(key) !== entry || closed) {
          void connection.close();
          throw new McpError('aborted', 'the connection was evicted while connecting');
        }
        entry.connection = connection;
        attach(key, entry);
        protocols.delete(key);
        protocols.set(key, connection.protocol);
        // Hints outlive idle connections, but not without bound: the least recently connected go first.
        if (protocols.size > MAX_PROTOCOL_HINTS) protocols.delete(protocols.keys().next().value ?? '');
        return connection;
      },
      (error: unknown) => {
        if (entries.get(key) === entry) entries.delete(key);
        throw error;
      },
    );
  };

  return {
    async get(key, endpoint, prefer, signal) {
      if (closed) throw new McpError('unreachable', 'the MCP connection pool is closed');
      const fingerprint = fingerprintOf(endpoint);
      const entry = entries.get(key);
      if (entry !== undefined && entry.fingerprint === fingerprint) {
        entry.usage.usedAt = performance.now();
        if (entry.connection === undefined) return entry.pending;
        if (!entry.connection.closed) return entry.connection;
      }
      const reconnecting = entry?.connection?.closed === true && entry.fingerprint === fingerprint;
      if (entry !== undefined) void retire(entry);
      const connection = await open(key, endpoint, fingerprint, prefer ?? protocols.get(key), signal);
      if (reconnecting) notify(key);
      return connection;
    },
    protocolOf: (key) => protocols.get(key),
    watch(key, listener) {
      watchers.set(key, listener);
      const entry = entries.get(key);
      if (entry !== undefined) attach(key, entry);
    },
    onToolsChanged(key, listener) {
      const set = listeners.get(key) ?? new Set();
      set.add(listener);
      listeners.set(key, set);
      const entry = entries.get(key);
      if (entry !== undefined) attach(key, entry);
      return () => {
        set.delete(listener);
        if (set.size > 0) return;
        listeners.delete(key);
        const current = entries.get(key);
        current?.detach?.();
        if (current !== undefined) delete current.detach;
      };
    },
    async evict(key) {
      protocols.delete(key);
      await forget(key);
    },
    async evictPrefix(prefix) {
      const keys = [...entries.keys(), ...protocols.keys()].filter((key) => key.startsWith(prefix));
      for (const key of keys) protocols.delete(key);
      await Promise.all(keys.map(forget));
    },
    async close() {
      closed = true;
      clearInterval(sweeper);
      const all = [...entries.values(), ...retiring];
      entries.clear();
      retiring.clear();
      listeners.clear();
      watchers.clear();
      await Promise.all(all.map((entry) => retire(entry, true)));
    },
  };
}
