/**
 * Agents as code: documents naming agents by name are planned against the organization's agents (create, update
 * or unchanged, with the changed fields) and applied idempotently. A lock records the version each name was left
 * at by the last apply; an agent changed since (its version moved) is refused unless forced, so an apply never
 * silently overwrites a change made in the console or the API. docs/agents-as-code.md describes the format.
 */
import { AppError, validationError } from '../../errors/app-error.ts';
import { jsonEqual } from '../../lib/hash.ts';
import { jsonDiff } from '../../lib/json-diff.ts';
import type { McpServer } from '../../tools/tool-config.ts';
import type { AuditContext } from '../audit/audit-log.ts';
import { responseFormatEcho } from '../output-format.ts';
import { configOf } from './agent-repo.ts';
import type { AgentService, WriteOptions } from './agent-service.ts';
import type { Agent, AgentCreateInput } from './agent-types.ts';

/** An agent document: the create body of POST /v1/agents (its name is its key). */
export type AgentDocument = AgentCreateInput & { kind: 'agent' };

/** What the last apply left: per agent name, the version it applied or found. */
export interface ApplyLock {
  agents: Record<string, number>;
}

export interface PlannedChange {
  kind: 'agent';
  name: string;
  action: 'create' | 'update' | 'unchanged';
  /** JSON pointers of the fields an update changes (empty otherwise). */
  changes: string[];
  /** The agent's version now (null before a create); after an apply, the version it was left at. */
  version: number | null;
  id: string | null;
}

export interface ApplyResult {
  dryRun: boolean;
  plan: PlannedChange[];
  lock: ApplyLock;
}

/** A document as an export writes it: its MCP servers as the agent stores them. */
export type ExportedDocument = AgentDocument & { mcpServers: McpServer[] };

/** What `agentry export` and GET /v1/export write: a document per agent, and the lock of their versions now. */
export interface ExportedAgents {
  documents: ExportedDocument[];
  lock: ApplyLock;
}

/**
 * The document that describes `agent` whole: applied to the organization it came from, it changes nothing. Fields
 * at their null value are left out (a document's absent field takes the create default, which is that value).
 */
export function documentOf(agent: Agent): ExportedDocument {
  const { description, networkPolicy, outputFormat, compactThreshold, ...rest } = configOf(agent);
  return {
    kind: 'agent',
    ...rest,
    ...(description === null ? {} : { description }),
    ...(networkPolicy === null ? {} : { networkPolicy }),
    outputFormat: outputFormat === null ? null : responseFormatEcho(outputFormat),
    ...(compactThreshold === null ? {} : { compactThreshold }),
    // A budget is written when there is one; a document without one leaves the agent's as it is.
    ...(agent.budget === null ? {} : { budget: agent.budget }),
  };
}

/** Runs a check of the document at `index`, naming its field as `documents[index].field` when it fails. */
function inDocument<T>(index: number, check: () => T): T {
  try {
    return check();
  } catch (error) {
    if (!(error instanceof AppError) || error.code !== 'validation_error' || error.param === null) throw error;
    const param = `documents[${index}].${error.param}`;
    throw validationError(
      param,
      error.message.startsWith(`${error.param} `)
        ? `${param}${error.message.slice(error.param.length)}`
        : error.message,
    );
  }
}

export function createAgentApplier(deps: { agents: AgentService }) {
  const { agents } = deps;

  async function plan(orgId: string, documents: AgentDocument[]) {
    const seen = new Set<string>();
    const out: { planned: PlannedChange; document: AgentDocument; expected: number | null }[] = [];
    for (const [index, document] of documents.entries()) {
      if (seen.has(document.name)) {
        throw validationError(`documents[${index}].name`, `agent ${JSON.stringify(document.name)} appears twice`);
      }
      seen.add(document.name);
      const { kind: _kind, ...input } = document;
      const desired = inDocument(index, () => agents.configFor(input));
      const ids = await agents.idsNamed(orgId, document.name);
      if (ids.length > 1) {
        throw validationError(
          `documents[${index}].name`,
          `several agents are named ${JSON.stringify(document.name)}: rename all but one to apply by name`,
        );
      }
      const id = ids[0];
      if (id === undefined) {
        out.push({
          planned: { kind: 'agent', name: document.name, action: 'create', changes: [], version: null, id: null },
          document,
          expected: null,
        });
        continue;
      }
      const current = await agents.get(orgId, id);
      const changes = jsonDiff(configOf(current), desired).map((change) => change.path);
      // A document without a budget leaves the agent's alone: budgets are operated, not part of the definition.
      if (document.budget !== undefined && !jsonEqual(agents.budgetFor(document.budget), current.budget)) {
        changes.push('/budget');
      }
      out.push({
        planned: {
          kind: 'agent',
          name: document.name,
          action: changes.length === 0 ? 'unchanged' : 'update',
          changes,
          version: current.version,
          id,
        },
        document,
        expected: current.version,
      });
    }
    return out;
  }

  return {
    /** The organization's agents as documents, oldest first, with the lock of the versions they are at. */
    async exportAgents(orgId: string): Promise<ExportedAgents> {
      const listed = await agents.list(orgId);
      return {
        documents: listed.map(documentOf),
        lock: { agents: Object.fromEntries(listed.map((agent) => [agent.name, agent.version])) },
      };
    },

    /**
     * Plans the documents and, unless `dryRun`, applies them. Refuses (409 version_conflict, nothing written) when
     * an agent the lock names was changed since the lock's version, unless `force`.
     */
    async apply(
      orgId: string,
      documents: AgentDocument[],
      options: { dryRun: boolean; force: boolean; lock: ApplyLock | null; actor: string | null; audit?: AuditContext },
    ): Promise<ApplyResult> {
      const planned = await plan(orgId, documents);
      const lock: ApplyLock = { agents: { ...options.lock?.agents } };
      const drifted = planned.filter(({ planned: p }) => {
        const locked = options.lock?.agents[p.name];
        return locked !== undefined && p.version !== null && p.version !== locked;
      });
      if (drifted.length > 0 && !options.force && !options.dryRun) {
        const names = drifted.map(({ planned: p }) => p.name);
        throw new AppError(
          'version_conflict',
          `changed since the last apply: ${names.map((name) => JSON.stringify(name)).join(', ')} (apply with force to overwrite)`,
          {
            details: {
              agents: Object.fromEntries(
                drifted.map(({ planned: p }) => [p.name, { locked: options.lock?.agents[p.name], current: p.version }]),
              ),
            },
          },
        );
      }
      if (options.dryRun) {
        for (const { planned: p } of planned) if (p.version !== null) lock.agents[p.name] = p.version;
        return { dryRun: true, plan: planned.map(({ planned: p }) => p), lock };
      }
      const write: WriteOptions = {
        actor: options.actor,
        ...(options.audit === undefined ? {} : { audit: options.audit }),
        auditAction: 'agent.applied',
      };
      for (const entry of planned) {
        const { planned: p, document } = entry;
        const { kind: _kind, ...input } = document;
        if (p.action === 'create') {
          const created = await agents.create(orgId, input, undefined, options.actor, options.audit, 'agent.applied');
          p.id = created.body.agent.id;
          p.version = created.body.agent.version;
        } else if (p.action === 'update' && p.id !== null && entry.expected !== null) {
          const full = agents.configFor(input);
          const budget = input.budget === undefined ? {} : { budget: input.budget };
          // A change of the budget alone is no new version (Agent.budget).
          const onlyBudget = p.changes.every((path) => path === '/budget');
          const updated = await agents.update(
            orgId,
            p.id,
            onlyBudget
              ? budget
              : { ...full, mcpServers: input.mcpServers ?? [], outputFormat: input.outputFormat ?? null, ...budget },
            { ...write, expectedVersion: entry.expected },
          );
          p.version = updated.agent.version;
        }
        if (p.version !== null) lock.agents[p.name] = p.version;
      }
      return { dryRun: false, plan: planned.map(({ planned: p }) => p), lock };
    },
  };
}

export type AgentApplier = ReturnType<typeof createAgentApplier>;
