/**
 * A thin adapter that lets Kysely's SqliteDialect drive Node's built-in `node:sqlite` (no native build).
 * Prepared statements are cached per SQL text; write transactions start with BEGIN IMMEDIATE so that two
 * processes sharing one file (the server and the CLI) queue on the busy timeout instead of failing with
 * SQLITE_BUSY when a read transaction tries to upgrade.
 */
import { DatabaseSync, type StatementSync } from 'node:sqlite';
import {
  type BinaryOperationNode,
  type DatabaseConnection,
  type DialectAdapter,
  type Driver,
  type OperationNode,
  type QueryCompiler,
  SqliteAdapter,
  type SqliteDatabase,
  SqliteDialect,
  type SqliteDialectConfig,
  SqliteDriver,
  SqliteQueryCompiler,
  type SqliteStatement,
  ValueNode,
} from 'kysely';
import {
  type Checkpointer,
  FALLBACK_FACTOR,
  MAX_PAUSE_MS,
  newPauseFlag,
  PAUSE_POLL_MS,
  PauseRequests,
  SERVER_AUTOCHECKPOINT_PAGES,
  startCheckpointer,
} from './sqlite-checkpointer.ts';

type Param = null | number | bigint | string | Uint8Array;

const STATEMENT_CACHE_SIZE = 500;
/** SQLite's default `wal_autocheckpoint`, in pages. */
const DEFAULT_AUTOCHECKPOINT_PAGES = 1000;

function toParams(parameters: ReadonlyArray<unknown>): Param[] {
  return parameters.map((value) => {
    if (value === undefined || value === null) return null;
    if (typeof value === 'boolean') return value ? 1 : 0;
    if (typeof value === 'number' || typeof value === 'bigint' || typeof value === 'string') return value;
    if (value instanceof Uint8Array) return value;
    if (value instanceof Date) return value.getTime();
    throw new TypeError(`unsupported SQLite parameter type: ${typeof value}`);
  });
}

class CachedStatement implements SqliteStatement {
  readonly reader: boolean;
  readonly #statement: StatementSync;

  constructor(statement: StatementSync) {
    this.#statement = statement;
    this.reader = statement.columns().length > 0;
  }

  all(parameters: ReadonlyArray<unknown>): unknown[] {
    return this.#statement.all(...toParams(parameters));
  }

  run(parameters: ReadonlyArray<unknown>): { changes: number | bigint; lastInsertRowid: number | bigint } {
    const result = this.#statement.run(...toParams(parameters));
    return { changes: result.changes, lastInsertRowid: result.lastInsertRowid };
  }

  iterate(parameters: ReadonlyArray<unknown>): IterableIterator<unknown> {
    return this.#statement.iterate(...toParams(parameters));
  }
}

export interface SqliteOptions {
  path: string;
  busyTimeoutMs?: number;
  /** Checkpoint the write-ahead log on a thread of its own instead of inside COMMITs (sqlite-checkpointer.ts). */
  backgroundCheckpoints?: boolean;
  /** `wal_autocheckpoint` in pages while the thread runs (default SERVER_AUTOCHECKPOINT_PAGES). */
  autocheckpointPages?: number;
  onCheckpointerError?: (error: unknown) => void;
  /** The checkpoint thread held the server's writes back longer than MAX_PAUSE_MS (a stuck sync): they resumed. */
  onLongCheckpointPause?: (pausedMs: number) => void;
}

/**
 * Who holds the one connection. Hands it to the next waiter in FIFO order (Kysely's generic single-connection mutex
 * wakes every waiter on each release, and all of them re-check the lock: O(waiters) per query under load); a
 * waiter is woken with the connection already its own, so nobody takes it between the hand-over and the waiter's
 * turn. While the checkpoint thread asks for a pause (sqlite-checkpointer.ts), the connection goes to nobody once
 * its holder releases it, until the thread is done or MAX_PAUSE_MS has passed.
 */
export class ConnectionQueue {
  readonly #onAbandoned: ((pausedMs: number) => void) | undefined;
  readonly #waiters: (() => void)[] = [];
  #held = false;
  #requests: PauseRequests | null = null;
  #paused = false;
  #pausedAt = 0;
  #timer: NodeJS.Timeout | undefined;
  #pauses = 0;

  /** `onAbandoned`: a pause the thread did not end within MAX_PAUSE_MS was ended here (its length). */
  constructor(options: { onAbandoned?: ((pausedMs: number) => void) | undefined } = {}) {
    this.#onAbandoned = options.onAbandoned;
  }

  /** Pauses held for the checkpoint thread so far. */
  get pauses(): number {
    return this.#pauses;
  }

  acquire(): Promise<void> | undefined {
    if (!this.#paused && this.#requests?.requested() === true) {
      this.#paused = true;
      if (!this.#held) this.#free();
    }
    if (!this.#held && !this.#paused) {
      this.#held = true;
      return undefined;
    }
    return new Promise<void>((resolve) => this.#waiters.push(resolve));
  }

  release(): void {
    if (this.#paused) {
      this.#held = false;
      this.#free();
      return;
    }
    const next = this.#waiters.shift();
    if (next === undefined) this.#held = false;
    else next();
  }

  /** Starts reading the checkpoint thread's requests. */
  watch(requests: PauseRequests): void {
    this.#requests = requests;
  }

  /** Stops reading them (the thread stopped or failed), ending a pause in progress. */
  unwatch(): void {
    this.#requests?.abandon();
    this.#requests = null;
    this.#resume();
  }

  /** Paused, and nobody holds the connection: tell the thread, then look every millisecond whether it is done. */
  #free(): void {
    if (this.#requests?.paused() === true) {
      this.#pauses += 1;
      this.#pausedAt = performance.now();
      this.#timer = setTimeout(this.#poll, PAUSE_POLL_MS);
    } else {
      this.#resume();
    }
  }

  readonly #poll = (): void => {
    const requests = this.#requests;
    if (requests === null) return;
    if (requests.done()) {
      this.#resume();
    } else if (performance.now() - this.#pausedAt >= MAX_PAUSE_MS) {
      requests.abandon();
      this.#resume();
      this.#onAbandoned?.(performance.now() - this.#pausedAt);
    } else {
      this.#timer = setTimeout(this.#poll, PAUSE_POLL_MS);
    }
  };

  #resume(): void {
    clearTimeout(this.#timer);
    if (!this.#paused) return;
    this.#paused = false;
    if (this.#held) return;
    const next = this.#waiters.shift();
    if (next === undefined) return;
    this.#held = true;
    next();
  }
}

export interface OpenedSqlite extends SqliteDatabase {
  /**
   * SQLite's `PRAGMA data_version`: changes whenever another connection (another process) commits. Lets caches of
   * rarely-changing rows stay exact across processes at the cost of one cheap pragma.
   */
  dataVersion(): number;
  /** Stops the checkpoint thread, if any (before `close`). */
  stopCheckpointer(): Promise<void>;
  /** Whether a transaction is open on the connection (SQLite ends one by itself after some errors). */
  inTransaction(): boolean;
  /** Turns at the connection, for the driver (and the checkpoint thread's pauses). */
  readonly queue: ConnectionQueue;
}

export function openSqlite(options: SqliteOptions): OpenedSqlite {
  const busyTimeoutMs = options.busyTimeoutMs ?? 5000;
  const database = new DatabaseSync(options.path, { enableForeignKeyConstraints: true, timeout: busyTimeoutMs });
  database.exec('PRAGMA journal_mode = WAL');
  database.exec('PRAGMA synchronous = NORMAL');
  let checkpointer: Checkpointer | null = null;
  const queue = new ConnectionQueue({ onAbandoned: options.onLongCheckpointPause });
  if (options.backgroundCheckpoints === true) {
    // Without the thread (it could not start, or it stopped), SQLite's own checkpoints take over as usual.
    const fallBack = (error: unknown) => {
      queue.unwatch();
      if (database.isOpen) database.exec(`PRAGMA wal_autocheckpoint = ${DEFAULT_AUTOCHECKPOINT_PAGES}`);
      options.onCheckpointerError?.(error);
    };
    try {
      const pages = Math.trunc(options.autocheckpointPages ?? SERVER_AUTOCHECKPOINT_PAGES);
      const pauseFlag = newPauseFlag();
      checkpointer = startCheckpointer(options.path, {
        busyTimeoutMs,
        restartPages: pages,
        pauseFlag,
        onError: fallBack,
      });
      queue.watch(new PauseRequests(pauseFlag));
      database.exec(`PRAGMA wal_autocheckpoint = ${pages * FALLBACK_FACTOR}`);
    } catch (error) {
      fallBack(error);
    }
  }
  const cache = new Map<string, CachedStatement>();
  const dataVersion = database.prepare('PRAGMA data_version');
  return {
    queue,
    dataVersion: () => Number(dataVersion.get()?.data_version ?? 0),
    stopCheckpointer: () => {
      queue.unwatch();
      return checkpointer?.stop() ?? Promise.resolve();
    },
    inTransaction: () => database.isTransaction,
    close: () => {
      cache.clear();
      database.close();
    },
    prepare: (sql: string): SqliteStatement => {
      const text = sql === 'begin' ? 'begin immediate' : sql;
      const cached = cache.get(text);
      if (cached !== undefined) return cached;
      const statement = new CachedStatement(database.prepare(text));
      if (cache.size >= STATEMENT_CACHE_SIZE) {
        const oldest = cache.keys().next().value;
        if (oldest !== undefined) cache.delete(oldest);
      }
      cache.set(text, statement);
      return statement;
    },
  };
}

/** SQLite has one connection, so queries and transactions take turns, in the order of the connection's queue. */
class FifoSqliteDriver extends SqliteDriver {
  readonly #database: OpenedSqlite;

  constructor(config: NodeSqliteDialectConfig) {
    super(config);
    this.#database = config.database;
  }

  override async acquireConnection(): Promise<DatabaseConnection> {
    await this.#database.queue.acquire();
    return super.acquireConnection();
  }

  override async releaseConnection(): Promise<void> {
    this.#database.queue.release();
  }

  /**
   * SQLite rolls a transaction back by itself after some errors (SQLITE_FULL, SQLITE_IOERR, SQLITE_NOMEM, some
   * SQLITE_BUSY): a ROLLBACK then fails with "cannot rollback - no transaction is active", and Kysely would throw
   * that instead of the error that ended the transaction. Nothing to roll back is not an error.
   */
  override async rollbackTransaction(connection: DatabaseConnection): Promise<void> {
    if (this.#database.inTransaction()) await super.rollbackTransaction(connection);
  }
}

/**
 * The columns that a partial index of the schema tests against a constant (`messages_waiting`: `"status" =
 * 'requires_action'`, `items_one_output_per_call`: `"type" = 'function_call_output'`, `agents_one_default`:
 * `"is_default" = 1`). test/sqlite-schema.test.ts keeps this list complete.
 */
export const PARTIAL_INDEX_COLUMNS: ReadonlySet<string> = new Set(['status', 'type', 'is_default']);

/** A value written into the statement: a name from a fixed set of states or kinds, or a small integer. */
const LITERAL_STRING = /^[a-z_]{1,64}$/;

function isLiteralValue(value: unknown): value is string | number {
  return typeof value === 'string' ? LITERAL_STRING.test(value) : Number.isSafeInteger(value);
}

function columnName(node: OperationNode): string | null {
  if (node.kind !== 'ReferenceNode' || !('column' in node)) return null;
  const column = node.column as OperationNode;
  if (column.kind !== 'ColumnNode' || !('column' in column)) return null;
  const identifier = column.column as { name?: unknown };
  return typeof identifier.name === 'string' ? identifier.name : null;
}

/**
 * Writes `column = value` into the statement instead of binding the value when the column is one a partial index
 * tests against a constant. When a WHERE clause compares such a column with a bound value, SQLite's planner reads
 * the value to decide whether the partial index applies, and then plans the statement again every time that
 * parameter is bound, at each execution: 230 µs for a session's release (`leases.ts`) where 15 µs runs it.
 * States and kinds are a few fixed names, so this adds a few statements to the cache, not one per call.
 */
class PartialIndexAwareCompiler extends SqliteQueryCompiler {
  protected override visitBinaryOperation(node: BinaryOperationNode): void {
    const right = node.rightOperand;
    if (
      node.operator.kind === 'OperatorNode' &&
      'operator' in node.operator &&
      node.operator.operator === '=' &&
      ValueNode.is(right) &&
      right.immediate !== true &&
      isLiteralValue(right.value)
    ) {
      const name = columnName(node.leftOperand);
      if (name !== null && PARTIAL_INDEX_COLUMNS.has(name)) {
        this.visitNode(node.leftOperand);
        this.append(' = ');
        this.appendImmediateValue(right.value);
        return;
      }
    }
    super.visitBinaryOperation(node);
  }
}

class FifoSqliteAdapter extends SqliteAdapter {
  // The driver serializes access itself; this keeps Kysely from adding its own mutex on top.
  override get supportsMultipleConnections(): boolean {
    return true;
  }
}

export interface NodeSqliteDialectConfig extends SqliteDialectConfig {
  database: OpenedSqlite;
}

export class NodeSqliteDialect extends SqliteDialect {
  readonly #config: NodeSqliteDialectConfig;

  constructor(config: NodeSqliteDialectConfig) {
    super(config);
    this.#config = config;
  }

  override createDriver(): Driver {
    return new FifoSqliteDriver(this.#config);
  }

  override createAdapter(): DialectAdapter {
    return new FifoSqliteAdapter();
  }

  override createQueryCompiler(): QueryCompiler {
    return new PartialIndexAwareCompiler();
  }
}
