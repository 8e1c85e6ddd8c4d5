/**
 * The agents `get` reads outside transactions, kept while the storage's change version stays (emptied whenever it
 * moves), and what a turn's start needs of its agent.
 */

import { notFound } from '../../errors/app-error.ts';
import { deepFreeze } from '../../lib/freeze.ts';
import type { Executor } from '../../storage/db.ts';
import { agentFromRow, findAgentRow } from './agent-repo.ts';
import type { Agent } from './agent-types.ts';

/** What the cached reads need: the storage, and its change version (without it agents are read on every get). */
export interface AgentCacheDeps {
  db: Executor;
  changeVersion?: () => number | null;
}

/** Agents kept by `get` outside transactions, emptied whenever the change version moves. */
const AGENT_CACHE_MAX = 10_000;

/** What starting a turn needs to know of its agent: the current version, and whether its workspace exists yet. */
export interface AgentStart {
  version: number;
  workspaceProvisioned: boolean;
}

/** An agent as the cache keeps it: the Agent, and what only a turn's start needs of its row. */
interface CachedAgent {
  agent: Agent;
  workspaceProvisioned: boolean;
}

/** The agent reads through the cache: `get`, `getIn` and `atTurnStart`. */
export function createAgentCache(deps: AgentCacheDeps) {
  const cache = new Map<string, CachedAgent>();
  let cachedAt: number | null = null;

  /** The cached agent, if the cache holds it at change version `version` (null: nothing is cached). */
  function cachedAgent(key: string, version: number | null): CachedAgent | undefined {
    if (version === null) return undefined;
    if (version !== cachedAt) {
      cache.clear();
      cachedAt = version;
    }
    return cache.get(key);
  }

  /** Reads the agent in `db`; kept at `version` only if nothing changed while it was read. */
  async function readAgent(db: Executor, orgId: string, id: string, version: number | null): Promise<CachedAgent> {
    const row = await findAgentRow(db, orgId, id);
    if (row === undefined) throw notFound('agent', id);
    const read = { agent: agentFromRow(row), workspaceProvisioned: row.workspace_provisioned_at !== null };
    if (version !== null && deps.changeVersion?.() === version) {
      if (cache.size >= AGENT_CACHE_MAX) cache.clear();
      deepFreeze(read.agent);
      cache.set(`${orgId}/${id}`, read);
    }
    return read;
  }

  /** The agent (frozen when it comes from the cache: callers never change what they are given). */
  async function get(orgId: string, id: string, db: Executor = deps.db): Promise<Agent> {
    // Inside a transaction the row is read there, as the transaction sees it.
    const version = db === deps.db ? (deps.changeVersion?.() ?? null) : null;
    return (cachedAgent(`${orgId}/${id}`, version) ?? (await readAgent(db, orgId, id, version))).agent;
  }

  /**
   * The agent for a transaction that reads it and does not write it (accepting a message): the cached one while
   * the cache holds it at the storage's current change version, as if read just before the transaction began;
   * else read in `trx`, and cached when nothing changed while it was read (frozen when it comes from the cache).
   */
  async function getIn(orgId: string, id: string, trx: Executor): Promise<Agent> {
    const version = deps.changeVersion?.() ?? null;
    return (cachedAgent(`${orgId}/${id}`, version) ?? (await readAgent(trx, orgId, id, version))).agent;
  }

  /**
   * What a turn's start needs of its agent, from the cache `get` and `getIn` fill (the accept of the turn's message
   * usually has), else read in `db`: the engine's own handle, whose reads outside a transaction are kept as `get`'s
   * are, so that a busy agent's turns do not each read its row.
   */
  async function atTurnStart(orgId: string, id: string, db: Executor): Promise<AgentStart> {
    const version = db.isTransaction ? null : (deps.changeVersion?.() ?? null);
    const { agent, workspaceProvisioned } =
      cachedAgent(`${orgId}/${id}`, version) ?? (await readAgent(db, orgId, id, version));
    return { version: agent.version, workspaceProvisioned };
  }

  return { get, getIn, atTurnStart };
}
