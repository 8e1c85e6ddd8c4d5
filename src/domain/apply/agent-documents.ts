/**
 * Agent documents (agents as code): each names its agent by name and is planned against the organization's agent
 * of that name (create, update or unchanged, with the changed fields), then written as a new version made with
 * If-Match on the version planned. domain/apply/apply-service.ts plans them with the other kinds and checks the
 * lock; docs/agents-as-code.md describes the format.
 */
import { validationError } from '../../errors/app-error.ts';
import { jsonEqual } from '../../lib/hash.ts';
import { jsonDiff } from '../../lib/json-diff.ts';
import type { McpServer, SamplingOptIn } from '../../tools/tool-config.ts';
import { configOf } from '../agents/agent-repo.ts';
import type { AgentService, WriteOptions } from '../agents/agent-service.ts';
import type { Agent, AgentCreateInput } from '../agents/agent-types.ts';
import type { AuditContext } from '../audit/audit-log.ts';
import { responseFormatEcho } from '../output-format.ts';
import { inDocument, type PlannedChange } from './apply-types.ts';

/** In a document, an MCP server entry of the agent, or a connector of the organization named by its name. */
export type DocumentMcpServer = McpServer | ({ kind: 'custom'; server: string; name?: string } & SamplingOptIn);

/** An agent document: the create body of POST /v1/agents (its name is its key), connectors also by name. */
export type AgentDocument = Omit<AgentCreateInput, 'mcpServers'> & {
  kind: 'agent';
  mcpServers?: DocumentMcpServer[];
};

/** A document as an export writes it: every MCP server entry written. */
export type ExportedDocument = AgentDocument & { mcpServers: DocumentMcpServer[] };

/**
 * Connector ids by name, as a document's `server` names them: null for a connector the apply creates, AMBIGUOUS
 * for a name several connectors of the organization have.
 */
export type ConnectorIds = ReadonlyMap<string, string | null>;

/** Stands for the id of a connector name that several connectors have: a document cannot name it. */
export const AMBIGUOUS = 'ambiguous';

/** An id no connector has: an entry naming a connector the apply creates is planned with it (it changes). */
const CONNECTOR_TO_CREATE = '00000000-0000-0000-0000-000000000000';

/**
 * The agent's MCP server entries as stored: each connector named by `server` replaced by its id (the one planned for
 * a connector the apply creates, until it is). An unknown name is a 400 naming the entry.
 */
function storedServers(
  entries: DocumentMcpServer[] | undefined,
  connectors: ConnectorIds,
  index: number,
): McpServer[] | undefined {
  return entries?.map((entry, position) => {
    if (!('server' in entry)) return entry;
    const id = connectors.get(entry.server);
    const param = `documents[${index}].mcpServers[${position}].server`;
    if (id === undefined) {
      throw validationError(
        param,
        `${param} names no MCP connector of this organization: ${JSON.stringify(entry.server)}`,
      );
    }
    if (id === AMBIGUOUS) {
      throw validationError(
        param,
        `${param}: several MCP connectors are named ${JSON.stringify(entry.server)}; name one by its serverId`,
      );
    }
    const { kind, server: _server, ...kept } = entry;
    return { kind, serverId: id ?? CONNECTOR_TO_CREATE, ...kept };
  });
}

/** The document's create input, its connectors by id. */
function inputOf(document: AgentDocument, connectors: ConnectorIds, index: number): AgentCreateInput {
  const { kind: _kind, mcpServers, ...rest } = document;
  const servers = storedServers(mcpServers, connectors, index);
  return { ...rest, ...(servers === undefined ? {} : { mcpServers: servers }) };
}

/**
 * The document that describes `agent` whole: applied to the organization it came from, it changes nothing. Fields
 * at their null value are left out (a document's absent field takes the create default, which is that value).
 * Connectors are named by their name where the organization has one connector of that name (`connectorNames`: by
 * id), so the document applies to another organization that has (or is given) such a connector; by id otherwise.
 */
export function documentOf(agent: Agent, connectorNames: ReadonlyMap<string, string> = new Map()): ExportedDocument {
  const { description, networkPolicy, outputFormat, compactThreshold, mcpServers, ...rest } = configOf(agent);
  return {
    kind: 'agent',
    ...rest,
    mcpServers: mcpServers.map((entry): DocumentMcpServer => {
      const name = 'serverId' in entry ? connectorNames.get(entry.serverId) : undefined;
      if (!('serverId' in entry) || name === undefined) return entry;
      const { kind, serverId: _serverId, ...kept } = entry;
      return { kind, server: name, ...kept };
    }),
    ...(description === null ? {} : { description }),
    ...(networkPolicy === null ? {} : { networkPolicy }),
    outputFormat: outputFormat === null ? null : responseFormatEcho(outputFormat),
    ...(compactThreshold === null ? {} : { compactThreshold }),
    // A budget is written when there is one; a document without one leaves the agent's as it is.
    ...(agent.budget === null ? {} : { budget: agent.budget }),
  };
}

/** An agent document planned: the change, and the version an update expects (null for a create). */
export interface PlannedAgent {
  planned: PlannedChange;
  document: AgentDocument;
  index: number;
  expected: number | null;
}

export function createAgentApplier(deps: { agents: AgentService }) {
  const { agents } = deps;

  return {
    /**
     * The organization's agents as documents, oldest first, with the version each is at (`connectorNames`: the
     * names of connectors named once, by id).
     */
    async exportAgents(
      orgId: string,
      connectorNames: ReadonlyMap<string, string>,
    ): Promise<{ document: ExportedDocument; version: number }[]> {
      return (await agents.list(orgId)).map((agent) => ({
        document: documentOf(agent, connectorNames),
        version: agent.version,
      }));
    },

    /**
     * Plans the agent documents (`index`: each one's position among all the documents, to name its fields;
     * `connectors`: the ids of the connectors documents may name).
     */
    async plan(
      orgId: string,
      documents: { index: number; document: AgentDocument }[],
      connectors: ConnectorIds,
    ): Promise<PlannedAgent[]> {
      const out: PlannedAgent[] = [];
      for (const { index, document } of documents) {
        const input = inputOf(document, connectors, index);
        const desired = await inDocument(index, () => agents.configFor(input));
        const ids = await agents.idsNamed(orgId, document.name);
        if (ids.length > 1) {
          throw validationError(
            `documents[${index}].name`,
            `several agents are named ${JSON.stringify(document.name)}: rename all but one to apply by name`,
          );
        }
        const id = ids[0];
        if (id === undefined) {
          const planned: PlannedChange = {
            kind: 'agent',
            name: document.name,
            action: 'create',
            changes: [],
            version: null,
            id: null,
          };
          out.push({ planned, document, index, expected: null });
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
          index,
          expected: current.version,
        });
      }
      return out;
    },

    /** Writes one planned agent, leaving its id and version on the plan's line. */
    async write(
      orgId: string,
      entry: PlannedAgent,
      options: { actor: string | null; audit?: AuditContext; connectors: ConnectorIds },
    ): Promise<void> {
      const { planned: p, document } = entry;
      const input = inputOf(document, options.connectors, entry.index);
      if (p.action === 'create') {
        const created = await inDocument(entry.index, () =>
          agents.create(orgId, input, undefined, options.actor, options.audit, 'agent.applied'),
        );
        p.id = created.body.agent.id;
        p.version = created.body.agent.version;
      } else if (p.action === 'update' && p.id !== null && entry.expected !== null) {
        const write: WriteOptions = {
          actor: options.actor,
          ...(options.audit === undefined ? {} : { audit: options.audit }),
          auditAction: 'agent.applied',
          expectedVersion: entry.expected,
        };
        const full = agents.configFor(input);
        const budget = input.budget === undefined ? {} : { budget: input.budget };
        // A change of the budget alone is no new version (Agent.budget).
        const onlyBudget = p.changes.every((path) => path === '/budget');
        const id = p.id;
        const updated = await inDocument(entry.index, () =>
          agents.update(
            orgId,
            id,
            onlyBudget
              ? budget
              : { ...full, mcpServers: input.mcpServers ?? [], outputFormat: input.outputFormat ?? null, ...budget },
            write,
          ),
        );
        p.version = updated.agent.version;
      }
    },
  };
}

export type AgentApplier = ReturnType<typeof createAgentApplier>;
