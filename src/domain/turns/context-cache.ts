/**
 * The conversation logs of recently run sessions, kept per process across turns and leases. A session's log is
 * append-only and its item sequence numbers are assigned under the session's row lock, so each step only reads
 * the items added since the last read (by this or any other process) instead of the whole history: a turn's cost
 * does not grow with the session's length, also when the client waits between turns and the lease is released.
 *
 * The changes to existing items are adoption and deletion. Items added to a conversation outside a turn have no
 * message until the next accepted message takes them; the read watermark never passes such an item, so it is read
 * again, with its message, once adopted. Deleted items leave an `item_removed` marker in the log, which drops them
 * from the log kept here when it is read. The logs kept are bounded by an estimate of their size; the least
 * recently used session's log goes first.
 */
import type { WindowCorrection } from '../../models/context-window.ts';
import type { Executor } from '../../storage/db.ts';
import type { ItemRow } from '../../storage/schema.ts';
import { ContextBuilder } from './context-builder.ts';
import { loadItemsAfter } from './item-store.ts';
import { type Item, itemFromRow } from './items.ts';

export interface ContextCache {
  /** Items of messages up to `upToMessageSeq`, in context order (message order, then log order). */
  load(db: Executor, upToMessageSeq: number): Promise<Item[]>;
  /**
   * Whether the items loaded so far include a decided approval of a server call (so a call of an earlier message
   * may be approved and waiting to run); false lets a turn skip looking for such calls through the whole log.
   */
  hasApprovalDecisions(): boolean;
  /**
   * The model context of `items` (an array `load` returned), as a builder that has taken exactly those items: the
   * log's own, advanced by the items added since the last call, so a step does not rebuild the whole history.
   */
  contextOf(items: readonly Item[]): ContextBuilder;
  /** What the session's steps learnt of each model's token count, by model id (engine/context-window.ts). */
  readonly corrections: Map<string, WindowCorrection>;
}

export interface ContextCaches {
  /** The log of one session, created empty on first use. */
  forSession(sessionId: string): ContextCache;
  /** Estimated bytes held, for tests and metrics. */
  bytes(): number;
  /** Sessions whose logs are held. */
  size(): number;
}

/**
 * Per-item overhead beyond the content's own text: the item's object and fields, and its share of the model context
 * built from it (measured about 150 bytes for the first, 110 for the second).
 */
const ITEM_OVERHEAD_BYTES = 384;

type LogItem = Item & { messageSeq: number };

/** Whether the items from `from` on (and the one before them) are in log order: message, then seq. */
function sortedFrom(items: readonly LogItem[], from: number): boolean {
  for (let index = Math.max(from, 1); index < items.length; index++) {
    const previous = items[index - 1];
    const current = items[index];
    if (previous === undefined || current === undefined) continue;
    if (previous.messageSeq > current.messageSeq) return false;
    if (previous.messageSeq === current.messageSeq && previous.seq > current.seq) return false;
  }
  return true;
}

/** One session's log, and the model context built from it (see above). */
class SessionLog implements ContextCache {
  /** Estimated bytes held, counted into the cache's total. */
  bytes = 0;
  readonly corrections = new Map<string, WindowCorrection>();
  readonly #sessionId: string;
  readonly #grew: (bytes: number) => void;
  readonly #items: LogItem[] = [];
  #approvalDecisions = false;
  // The model context of items[0, builder.count): started again whenever the items are reordered.
  #builder = new ContextBuilder();
  // Every item up to `watermark` is held; above it, `held` lists the seqs already held (past an unadopted item).
  #watermark = 0;
  readonly #held = new Set<number>();

  constructor(sessionId: string, grew: (bytes: number) => void) {
    this.#sessionId = sessionId;
    this.#grew = grew;
  }

  hasApprovalDecisions(): boolean {
    return this.#approvalDecisions;
  }

  async load(db: Executor, upToMessageSeq: number): Promise<Item[]> {
    const items = this.#items;
    const rows = await loadItemsAfter(db, this.#sessionId, this.#watermark);
    const before = items.length;
    const removed: string[] = [];
    const added = this.#take(rows, removed);
    if (removed.length > 0) {
      // Items deleted from the log since it was read: dropped, and the context built again without them.
      const gone = new Set(removed);
      const kept = items.filter((item) => !gone.has(item.id));
      items.length = 0;
      for (const item of kept) items.push(item);
      this.#builder = new ContextBuilder();
    }
    if (added > 0) {
      // An answer to an earlier turn can arrive after a later message's input: keep message order first. Rows
      // come in log order, so the array is usually still sorted and needs no pass over the whole history.
      if (!sortedFrom(items, removed.length > 0 ? 0 : before)) {
        items.sort((a, b) => a.messageSeq - b.messageSeq || a.seq - b.seq);
        this.#builder = new ContextBuilder();
      }
      this.bytes += added;
      this.#grew(added);
    }
    const last = items.at(-1);
    return last === undefined || last.messageSeq <= upToMessageSeq
      ? items.slice()
      : items.filter((item) => item.messageSeq <= upToMessageSeq);
  }

  /**
   * Appends the rows not held yet and moves the watermark past them; adds the ids of the items they remove to
   * `removed`. Returns the estimated bytes appended.
   */
  #take(rows: readonly (ItemRow & { message_seq: number | null })[], removed: string[]): number {
    let added = 0;
    let blocked = false;
    for (const row of rows) {
      if (this.#held.has(row.seq)) {
        if (!blocked) {
          this.#watermark = row.seq;
          this.#held.delete(row.seq);
        }
        continue;
      }
      if (row.message_seq === null) {
        // Not adopted by a message yet: read it again next time.
        blocked = true;
        continue;
      }
      const item: LogItem = { ...itemFromRow(row), messageSeq: row.message_seq };
      if (item.content.type === 'approval_decision') this.#approvalDecisions = true;
      if (item.content.type === 'item_removed') removed.push(...item.content.itemIds);
      this.#items.push(item);
      added += row.content.length + ITEM_OVERHEAD_BYTES;
      if (blocked) this.#held.add(row.seq);
      else this.#watermark = row.seq;
    }
    return added;
  }

  contextOf(loaded: readonly Item[]): ContextBuilder {
    // `loaded` is a prefix of the log unless the log was reordered since: then it is built on its own.
    const items = this.#items;
    const built = this.#builder.count;
    let own = built <= loaded.length && (built === 0 || loaded[built - 1] === items[built - 1]);
    for (let index = built; own && index < loaded.length; index++) own = loaded[index] === items[index];
    const target = own ? this.#builder : new ContextBuilder();
    for (let index = target.count; index < loaded.length; index++) target.append(loaded[index] as Item);
    return target;
  }
}

/**
 * Logs of up to about `maxBytes` (estimated) across sessions; 0 keeps a log only for the lease that uses it. A
 * log dropped from the cache while a worker still uses it stays valid for that worker; it is just not kept.
 */
export function createContextCaches(maxBytes: number): ContextCaches {
  // Map order is recency order: a session used again moves to the end.
  const logs = new Map<string, SessionLog>();
  let total = 0;

  function grew(sessionId: string, log: SessionLog, bytes: number): void {
    if (logs.get(sessionId) !== log) return;
    total += bytes;
    for (const [id, oldest] of logs) {
      if (total <= maxBytes) break;
      logs.delete(id);
      total -= oldest.bytes;
    }
  }

  return {
    forSession(sessionId) {
      let log = logs.get(sessionId);
      if (log === undefined) {
        const created: SessionLog = new SessionLog(sessionId, (bytes) => grew(sessionId, created, bytes));
        log = created;
      } else {
        logs.delete(sessionId);
      }
      logs.set(sessionId, log);
      return log;
    },
    bytes: () => total,
    size: () => logs.size,
  };
}

/** A log for one turn only (callers without a process-wide cache). */
export function createContextCache(sessionId: string): ContextCache {
  return new SessionLog(sessionId, () => undefined);
}
