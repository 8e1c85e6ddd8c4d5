/**
 * A version number for caches of rarely written tables (API keys, agents, webhook endpoints): it moves whenever
 * such a table may have changed, so a cache that remembers the version it was filled at knows when to empty
 * itself.
 *
 * - Writes made by this process move it as they execute: a Kysely plugin sees every insert, update and delete.
 *   That is before the writing transaction commits; a cache that must not keep an answer read between the write
 *   and the commit on another connection also needs a signal after the commit (domain/webhooks/subscriptions.ts).
 * - Writes made by other processes: on SQLite, `PRAGMA data_version` (it changes when another connection
 *   commits), checked on each read of the version; on Postgres, a statement trigger on those tables sends
 *   `NOTIFY agentry_changes` with the schema's name (migrations 0015 and 0016), which a dedicated listening
 *   connection receives once the writing transaction commits. While that connection is down the version is null
 *   and caches must read through; it moves again when the connection is back.
 */
import { createRequire } from 'node:module';
import {
  AliasNode,
  type KyselyPlugin,
  type PluginTransformQueryArgs,
  type PluginTransformResultArgs,
  type QueryResult,
  type RootOperationNode,
  TableNode,
  type UnknownRow,
} from 'kysely';
import type pg from 'pg';

/** The tables whose writes move the version; the Postgres triggers of migrations 0015, 0016 and 0031 cover the same ones. */
export const SIGNALLED_TABLES: ReadonlySet<string> = new Set(['api_keys', 'agents', 'webhook_endpoints', 'limits']);

/** The Postgres notification channel; the payload is the schema written to. */
export const CHANGE_CHANNEL = 'agentry_changes';

const RECONNECT_MS = 1000;

export interface ChangeSignal {
  /** The current version, or null when changes by other processes cannot be seen right now (read through). */
  version(): number | null;
  /** The plugin that moves the version on this process's own writes. */
  plugin: KyselyPlugin;
  close(): Promise<void>;
}

function tableOf(node: RootOperationNode): string | null {
  const target =
    node.kind === 'InsertQueryNode'
      ? node.into
      : node.kind === 'UpdateQueryNode'
        ? node.table
        : node.kind === 'DeleteQueryNode'
          ? node.from.froms[0]
          : undefined;
  if (target === undefined) return null;
  const table = AliasNode.is(target) ? target.node : target;
  return TableNode.is(table) ? table.table.identifier.name : null;
}

function localWrites(bump: () => void): KyselyPlugin {
  return {
    transformQuery({ node }: PluginTransformQueryArgs): RootOperationNode {
      const table = tableOf(node);
      if (table !== null && SIGNALLED_TABLES.has(table)) bump();
      return node;
    },
    async transformResult({ result }: PluginTransformResultArgs): Promise<QueryResult<UnknownRow>> {
      return result;
    },
  };
}

/**
 * SQLite: this process's writes, plus `data_version` for everyone else's. The pragma is read at most once per turn
 * of the event loop: requests handled in the same turn see other processes' commits as of its start, which is also
 * what they would see had they arrived together. (Reading it for every cache lookup was a sixth of a busy
 * server's time.)
 */
export function sqliteChangeSignal(dataVersion: () => number): ChangeSignal {
  let version = 0;
  let seen = dataVersion();
  let checked = false;
  const recheck = () => {
    checked = false;
  };
  return {
    version() {
      if (!checked) {
        checked = true;
        setImmediate(recheck);
        const current = dataVersion();
        if (current !== seen) {
          seen = current;
          version += 1;
        }
      }
      return version;
    },
    plugin: localWrites(() => {
      version += 1;
    }),
    close: async () => undefined,
  };
}

export interface PostgresSignalOptions {
  /** The listening connection's settings (a connect timeout: a connection attempt that hangs is retried too). */
  connection: pg.ClientConfig;
  /** The schema this deployment writes to (`public` without AGENTRY_DATABASE_SCHEMA). */
  schema: string;
  onError?: (error: unknown) => void;
}

/** Postgres: this process's writes, plus notifications from the triggers; listening starts on first use. */
export function postgresChangeSignal(options: PostgresSignalOptions): ChangeSignal {
  let version = 0;
  let client: pg.Client | null = null;
  let listening = false;
  let closed = false;
  let retry: NodeJS.Timeout | null = null;

  function connect(): void {
    if (closed || client !== null) return;
    // The driver is loaded here, not at the top: a SQLite process never needs it.
    const driver = createRequire(import.meta.url)('pg') as typeof pg;
    const next = new driver.Client(options.connection);
    client = next;
    const lost = (error?: unknown) => {
      if (client !== next) return;
      if (error !== undefined) options.onError?.(error);
      listening = false;
      client = null;
      next.end().catch(() => undefined);
      if (!closed) {
        retry = setTimeout(connect, RECONNECT_MS);
        retry.unref();
      }
    };
    next.on('error', lost);
    next.on('end', () => lost());
    next.on('notification', (message) => {
      if (message.channel === CHANGE_CHANNEL && message.payload === options.schema) version += 1;
    });
    next
      .connect()
      .then(() => next.query(`LISTEN ${CHANGE_CHANNEL}`))
      .then(() => {
        if (client !== next) return;
        // Anything may have changed while nobody listened.
        version += 1;
        listening = true;
      })
      .catch(lost);
  }

  return {
    version() {
      if (!listening) {
        connect();
        return null;
      }
      return version;
    },
    plugin: localWrites(() => {
      version += 1;
    }),
    async close() {
      closed = true;
      if (retry !== null) clearTimeout(retry);
      const current = client;
      client = null;
      listening = false;
      await current?.end().catch(() => undefined);
    },
  };
}
