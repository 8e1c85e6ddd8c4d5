/**
 * The agent's memories as the `memory` tool reads and writes them. The tool layer names what it needs here;
 * domain/memories/memory-store.ts, the one writer of `memories`, provides it (the composition root hands it over).
 * Every call is confined to one scope: the organization, the agent, and the end user of the turn (null: the agent's
 * own memories, those of sessions without an end user).
 */
import type { Executor } from '../../storage/db.ts';

/** The longest memory kept (characters). */
export const MAX_MEMORY_CHARS = 2_000;
/** The most memories one agent keeps per end user (and of its own). */
export const MAX_MEMORIES_PER_SCOPE = 1_000;
/** The most memories one search returns. */
export const MAX_MEMORY_RESULTS = 20;

export interface MemoryScope {
  orgId: string;
  agentId: string;
  /** The end user the memories belong to; null for the agent's own. */
  endUser: string | null;
}

export interface MemoryEntry {
  id: string;
  content: string;
  /** Epoch milliseconds. */
  updatedAt: number;
}

export interface MemoryStore {
  /** Saves a memory; null when the scope already holds MAX_MEMORIES_PER_SCOPE. */
  save(db: Executor, scope: MemoryScope, content: string): Promise<MemoryEntry | null>;
  /**
   * The scope's memories whose content holds every word of `query` (case-insensitive substring match of each
   * whitespace-separated word; an empty query matches all), most recently updated first, at most `limit`.
   */
  search(db: Executor, scope: MemoryScope, query: string, limit: number): Promise<MemoryEntry[]>;
  /** Replaces a memory's content; null when the scope has no memory of that id. */
  update(db: Executor, scope: MemoryScope, id: string, content: string): Promise<MemoryEntry | null>;
  /** Deletes a memory; false when the scope has no memory of that id. */
  remove(db: Executor, scope: MemoryScope, id: string): Promise<boolean>;
}
