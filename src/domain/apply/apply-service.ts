/**
 * Agents as code (docs/agents-as-code.md): documents of every kind (agents, MCP connectors, schedules, webhook
 * endpoints), each naming its resource by name, are planned against the organization's resources and applied
 * idempotently. Every document is planned (and checked) before anything is written; then the writes follow the
 * references: connectors (which agents use), agents, schedules (which name agents), webhook endpoints. A lock
 * records what the last apply left, an agent's version or another resource's change marker; a resource changed
 * since is refused unless forced, so an apply never silently overwrites a change made in the console or the API.
 */
import { AppError, validationError } from '../../errors/app-error.ts';
import type { Clock } from '../../lib/clock.ts';
import type { AgentService } from '../agents/agent-service.ts';
import { SYSTEM_AUDIT } from '../audit/audit-log.ts';
import type { McpServerService } from '../mcp-servers/mcp-server-service.ts';
import type { ScheduleService } from '../schedules/schedule-service.ts';
import type { EndpointService } from '../webhooks/endpoint-service.ts';
import {
  type AgentApplier,
  type AgentDocument,
  AMBIGUOUS,
  type ConnectorIds,
  type ExportedDocument,
} from './agent-documents.ts';
import {
  type ApplyLock,
  type ApplyOptions,
  type ApplyResult,
  inDocument,
  MARKED_KINDS,
  type MarkerSection,
  namedOnce,
  type PlannedChange,
} from './apply-types.ts';
import { connectorKind, type McpServerDocument } from './connector-documents.ts';
import { endpointKind, type WebhookEndpointDocument } from './endpoint-documents.ts';
import type { PlanContext, PlannedWrite, ResourceKind, WriteContext } from './resource-kind.ts';
import { type ScheduleDocument, scheduleKind } from './schedule-documents.ts';

export type Document = AgentDocument | McpServerDocument | ScheduleDocument | WebhookEndpointDocument;

/** What `agentry export` and GET /v1/export write: a document per resource, and the lock of their state now. */
export interface ExportedDocuments {
  documents: (ExportedDocument | McpServerDocument | ScheduleDocument | WebhookEndpointDocument)[];
  lock: ApplyLock;
}

interface PlannedResource {
  planned: PlannedChange;
  index: number;
  marker: string | null;
  write: PlannedWrite['write'];
}

type Drift = Record<string, { locked: number | string; current: number | string }>;

/** Sets `sections[section][name]`, making the section when it is the first. */
function put<S extends string, V>(sections: Partial<Record<S, Record<string, V>>>, section: S, name: string, value: V) {
  const inner = sections[section] ?? {};
  inner[name] = value;
  sections[section] = inner;
}

/** Connector ids by name (AMBIGUOUS for a name several have). */
function connectorIds(existing: { id: string; name: string }[]): Map<string, string | null> {
  const out = new Map<string, string | null>();
  for (const { id, name } of existing) out.set(name, out.has(name) ? AMBIGUOUS : id);
  return out;
}

const entriesOf = <K extends Document['kind']>(documents: Document[], kind: K) =>
  documents.flatMap((document, index) =>
    document.kind === kind ? [{ index, document: document as Extract<Document, { kind: K }> }] : [],
  );

export function createApplyService(deps: {
  agents: AgentService;
  agentApplier: AgentApplier;
  mcpServers: McpServerService;
  schedules: ScheduleService;
  endpoints: EndpointService;
  clock: Clock;
}) {
  const { agents, agentApplier } = deps;
  const connectors = connectorKind(deps);
  const schedules = scheduleKind(deps);
  const endpoints = endpointKind(deps);
  /** In the order they are written, after agents for schedules and endpoints. */
  const kinds = [connectors, schedules, endpoints] as const;

  async function planKind<D extends { name: string }>(
    kind: ResourceKind<D>,
    entries: { index: number; document: D }[],
    context: PlanContext,
  ): Promise<PlannedResource[]> {
    if (entries.length === 0) return [];
    const existing = await kind.existing(context.orgId);
    const out: PlannedResource[] = [];
    for (const { index, document } of entries) {
      const current = namedOnce(existing, document.name, index, kind.noun);
      const { changes, write } = await inDocument(index, () => kind.plan(context, document, current));
      const action = current === undefined ? 'create' : changes.length === 0 ? 'unchanged' : 'update';
      out.push({
        planned: { kind: kind.kind, name: document.name, action, changes, version: null, id: current?.id ?? null },
        index,
        marker: current?.marker ?? null,
        write,
      });
    }
    return out;
  }

  function checkNamesOnce(documents: Document[]): void {
    const seen = new Set<string>();
    for (const [index, document] of documents.entries()) {
      const key = `${document.kind}\u0000${document.name}`;
      if (seen.has(key)) {
        const what = document.kind === 'agent' ? 'agent' : document.kind.replace('_', ' ');
        throw validationError(`documents[${index}].name`, `${what} ${JSON.stringify(document.name)} appears twice`);
      }
      seen.add(key);
    }
  }

  /** The lock's markers of the resources of these kinds now, by name (after an apply, what it left). */
  async function markersNow(orgId: string, planned: PlannedResource[]) {
    const out: Partial<Record<MarkerSection, Record<string, string>>> = {};
    for (const kind of kinds) {
      const names = new Set(planned.filter(({ planned: p }) => p.kind === kind.kind).map(({ planned: p }) => p.name));
      if (names.size === 0) continue;
      const section: Record<string, string> = {};
      for (const resource of await kind.existing(orgId)) {
        if (names.has(resource.name)) section[resource.name] = resource.marker;
      }
      out[MARKED_KINDS[kind.kind]] = section;
    }
    return out;
  }

  /** The lock given, with the versions and markers of the resources planned laid over it. */
  function lockAfter(
    previous: ApplyLock | null,
    versions: Record<string, number>,
    markers: Partial<Record<MarkerSection, Record<string, string>>>,
  ): ApplyLock {
    const lock: ApplyLock = { agents: { ...previous?.agents, ...versions } };
    for (const section of Object.values(MARKED_KINDS)) {
      const merged = { ...previous?.[section], ...markers[section] };
      if (Object.keys(merged).length > 0) lock[section] = merged;
    }
    return lock;
  }

  return {
    /**
     * Every resource of the organization as a document (connectors, agents, schedules, and webhook endpoints unless
     * `endpoints` is false: a key that may not read them), and the lock of their state now.
     */
    async exportDocuments(orgId: string, options: { endpoints: boolean }): Promise<ExportedDocuments> {
      const [servers, ...others] = await Promise.all(
        kinds.map((kind) => (kind === endpoints && !options.endpoints ? [] : kind.existing(orgId))),
      );
      const named = connectorIds(servers ?? []);
      const connectorNames = new Map(
        [...named].flatMap(([name, id]) => (id === null || id === AMBIGUOUS ? [] : [[id, name] as const])),
      );
      const exported = await agentApplier.exportAgents(orgId, connectorNames);
      const lock: ApplyLock = {
        agents: Object.fromEntries(exported.map(({ document, version }) => [document.name, version])),
      };
      for (const [position, existing] of [servers, ...others].entries()) {
        const kind = kinds[position];
        if (kind === undefined || existing === undefined || existing.length === 0) continue;
        lock[MARKED_KINDS[kind.kind]] = Object.fromEntries(existing.map((item) => [item.name, item.marker]));
      }
      return {
        documents: [
          ...(servers ?? []).map((item) => item.document),
          ...exported.map(({ document }) => document),
          ...others.flatMap((existing) => existing.map((item) => item.document)),
        ],
        lock,
      };
    },

    /**
     * Plans the documents and, unless `dryRun`, applies them. Refuses (409 version_conflict, nothing written) when
     * a resource the lock names was changed since, unless `force`.
     */
    async apply(orgId: string, documents: Document[], options: ApplyOptions): Promise<ApplyResult> {
      checkNamesOnce(documents);
      const connectorDocuments = entriesOf(documents, 'mcp_server');
      const existingConnectors = await connectors.existing(orgId);
      // Connectors documents may name: the organization's, and those this apply creates (their ids come later).
      const plannedConnectorIds = connectorIds(existingConnectors);
      for (const { document } of connectorDocuments) {
        if (!plannedConnectorIds.has(document.name)) plannedConnectorIds.set(document.name, null);
      }
      const plannedAgents = await agentApplier.plan(orgId, entriesOf(documents, 'agent'), plannedConnectorIds);
      const orgAgents = await agents.list(orgId);
      const creating = new Set(plannedAgents.filter((a) => a.planned.action === 'create').map((a) => a.planned.name));
      const agentsNamed = (name: string) => orgAgents.filter((agent) => agent.name === name);
      const context: PlanContext = {
        orgId,
        secrets: options.secrets ?? {},
        requireAgent(name, param) {
          if (creating.has(name)) return;
          const found = agentsNamed(name);
          if (found.length === 0) {
            throw validationError(param, `${param} names no agent of this organization: ${JSON.stringify(name)}`);
          }
          if (found.length > 1) {
            throw validationError(param, `${param}: several agents are named ${JSON.stringify(name)}`);
          }
        },
      };
      const planned = [
        ...(await planKind(connectors, connectorDocuments, context)),
        ...(await planKind(schedules, entriesOf(documents, 'schedule'), context)),
        ...(await planKind(endpoints, entriesOf(documents, 'webhook_endpoint'), context)),
      ];

      const drift: Record<string, Drift> = {};
      const drifted: string[] = [];
      for (const { planned: p } of plannedAgents) {
        const locked = options.lock?.agents[p.name];
        if (locked === undefined || p.version === null || p.version === locked) continue;
        put(drift, 'agents', p.name, { locked, current: p.version });
        drifted.push(JSON.stringify(p.name));
      }
      for (const { planned: p, marker } of planned) {
        if (p.kind === 'agent') continue;
        const section = MARKED_KINDS[p.kind];
        const locked = options.lock?.[section]?.[p.name];
        if (locked === undefined || marker === null || marker === locked) continue;
        put(drift, section, p.name, { locked, current: marker });
        drifted.push(`${p.kind.replace('_', ' ')} ${JSON.stringify(p.name)}`);
      }
      if (drifted.length > 0 && !options.force && !options.dryRun) {
        throw new AppError(
          'version_conflict',
          `changed since the last apply: ${drifted.join(', ')} (apply with force to overwrite)`,
          { details: drift },
        );
      }

      const plan = () => {
        const byIndex = new Map<number, PlannedChange>();
        for (const entry of [...plannedAgents, ...planned]) byIndex.set(entry.index, entry.planned);
        return documents.flatMap((_document, index) => byIndex.get(index) ?? []);
      };
      const versions = () =>
        Object.fromEntries(
          plannedAgents.flatMap(({ planned: p }) => (p.version === null ? [] : [[p.name, p.version] as const])),
        );
      if (options.dryRun) {
        const markers: Partial<Record<MarkerSection, Record<string, string>>> = {};
        for (const { planned: p, marker } of planned) {
          if (p.kind !== 'agent' && marker !== null) put(markers, MARKED_KINDS[p.kind], p.name, marker);
        }
        return { dryRun: true, plan: plan(), lock: lockAfter(options.lock, versions(), markers) };
      }

      const audit = options.audit;
      const writeContext: WriteContext = {
        orgId,
        audit: audit ?? SYSTEM_AUDIT,
        agentId(name, param) {
          const id = plannedAgents.find((a) => a.planned.name === name)?.planned.id ?? agentsNamed(name)[0]?.id;
          if (id === undefined || id === null) throw validationError(param, `${param} names no agent: ${name}`);
          return id;
        },
      };
      const writeAll = async (entries: PlannedResource[]) => {
        for (const entry of entries) {
          const written = await inDocument(entry.index, () => entry.write(writeContext));
          entry.planned.id = written.id;
          if (written.signing_secret !== undefined) entry.planned.signing_secret = written.signing_secret;
        }
      };
      const plannedConnectors = planned.filter(({ planned: p }) => p.kind === 'mcp_server');
      await writeAll(plannedConnectors);
      const writtenConnectorIds = new Map(plannedConnectorIds);
      for (const { planned: p } of plannedConnectors) if (p.id !== null) writtenConnectorIds.set(p.name, p.id);
      const connectorsNow: ConnectorIds = writtenConnectorIds;
      for (const entry of plannedAgents) {
        await agentApplier.write(orgId, entry, {
          actor: options.actor,
          ...(audit === undefined ? {} : { audit }),
          connectors: connectorsNow,
        });
      }
      await writeAll(planned.filter(({ planned: p }) => p.kind !== 'mcp_server'));
      return {
        dryRun: false,
        plan: plan(),
        lock: lockAfter(options.lock, versions(), await markersNow(orgId, planned)),
      };
    },
  };
}

export type ApplyService = ReturnType<typeof createApplyService>;
