/**
 * The tool layer's one seam (DESIGN section 10). A ToolProvider turns part of an agent's configuration into
 * tool sources; the registry asks every provider, so the same answer decides both the warnings of an accepted
 * message ("configured, but this deployment cannot run it") and the tools a turn offers the model. The engine
 * knows only these types: it never imports a provider.
 */
import type { Warning } from '../events/session-values.ts';
import type { Executor } from '../storage/db.ts';
import type {
  McpElicitationAnswer as ElicitationAnswer,
  McpElicitation as ElicitationRequest,
  McpSamplingRequest as SamplingRequest,
  McpSamplingResult as SamplingResult,
} from './mcp/client.ts';
import type { AgentToolConfig, McpServer, NetworkPolicy } from './tool-config.ts';

/** Who answers a call: the service (server), the API caller (client), or a person (question). */
export type ToolKind = 'client' | 'question' | 'server';

/** Where a server tool comes from, for Responses items (`server_label`), traces and the model-facing name. */
export interface ToolOrigin {
  /** The MCP connector (organization resource) behind the tool, if any. */
  serverId: string | null;
  /** Human label of the server: the agent-local name, the connector's name, a toolkit, or `agentry`. */
  serverLabel: string;
  /** The tool's own name at its server (the exposed name may be prefixed to avoid a clash). */
  tool: string;
}

/** What an agent's tools run with: the agent's egress policy, and the deployment's exception for development. */
export interface EgressContext {
  policy: NetworkPolicy | null;
  allowInsecureDestinations: boolean;
}

export interface ToolProgress {
  progress?: number;
  total?: number;
  message?: string;
}

/**
 * Everything a server tool's execution may need about the call it serves. Providers that work in the agent's
 * workspace get it from the sandbox runtime by `orgId` and `agentId`.
 */
export interface ToolCallContext {
  /** Aborts on interrupt, shutdown, lease loss, or the call's own timeout. */
  signal: AbortSignal;
  /** Epoch milliseconds after which the call is abandoned. */
  deadline: number;
  orgId: string;
  agentId: string;
  sessionId: string;
  /** The end user the session serves, if it names one: per-user data (memories, credentials) is theirs alone. */
  endUser: string | null;
  messageId: string;
  runId: string;
  callId: string;
  egress: EgressContext;
  /** Reports progress to live listeners (session stream, Responses stream); never stored. */
  progress(update: ToolProgress): void;
  /** Sent along with outbound calls (MCP `_meta`) so a server can deduplicate or correlate. */
  meta: Record<string, string>;
  /**
   * Asks a person for what a server requests during the call (MCP elicitation). Resolves with an answer already
   * given; otherwise the call is suspended: the promise rejects and the call's signal aborts, and the call runs again
   * once answered (docs/mcp-auth.md "Elicitation"). Absent: elicitations are declined.
   */
  elicit?: (request: ElicitationRequest) => Promise<ElicitationAnswer>;
  /** Serves a server's sampling request with the agent's model, billed to the run; absent: refused. */
  sample?: (request: SamplingRequest) => Promise<SamplingResult>;
}

export type {
  McpElicitation as ElicitationRequest,
  McpElicitationAnswer as ElicitationAnswer,
  McpSamplingPart as SamplingPart,
  McpSamplingRequest as SamplingRequest,
  McpSamplingResult as SamplingResult,
} from './mcp/client.ts';

export interface ToolOutput {
  /** The model-facing result text. */
  output: string;
  /** A tool-level error: reported to the model, which may recover. */
  isError: boolean;
}

/** One tool as the model will see it, with how it is answered. */
export interface ResolvedTool {
  /** Name before clash handling: the exposed name unless another tool of the agent has it. */
  name: string;
  description: string;
  /** JSON Schema of the arguments (root type object). */
  parameters: Record<string, unknown>;
  strict: boolean;
  kind: ToolKind;
  origin: ToolOrigin;
  /** Keeps its name even on a clash (client tools: the caller dispatches by that exact name). */
  fixedName?: boolean;
  /** Server tools only. Throwing reports the error text to the model as a failed call. */
  execute?: (args: unknown, context: ToolCallContext) => Promise<ToolOutput>;
  /**
   * How long one call may run, for a tool that bounds its own work (a sandboxed command has its own, configurable
   * wall time); the deployment's call timeout (AGENTRY_TOOL_TIMEOUT_MS) otherwise.
   */
  timeoutMs?: number;
  /**
   * Whether a call with these (parsed) arguments can change anything. Absent: it may (MCP tools, whose effects the
   * service cannot know). A call that cannot change anything never waits for approval.
   */
  changes?: (args: unknown) => boolean;
  /**
   * Set on built-in tools only, by their provider (never from anything a server lists): the internal entry the
   * tool belongs to (`sandbox`, `http_client`). A built-in keeps its own name (an MCP tool of that name is the one
   * prefixed), and approval overrides name it by that name or by `<entry>__*` / `agentry__*`.
   */
  builtinEntry?: string;
}

/** What resolving needs besides the agent: whose agent it is, and where to read organization resources. */
export interface ToolScope {
  orgId: string;
  agentId: string;
  db: Executor;
  /** The end user the turn acts for (a Response's `safety_identifier`/`user`): whose connector credentials apply. */
  endUser?: string | null;
}

/** A server's tools, loaded for one turn. */
export interface LoadedSource {
  tools: ResolvedTool[];
  /** Set for MCP servers: the turn records an `mcp_list_tools` item the first time a conversation sees it. */
  listing?: { serverId: string | null; serverLabel: string };
  /**
   * Text the model should read with the agent's instructions for this turn (a skill's name and description,
   * where its files are). Appended after the agent's own instructions, in source order.
   */
  instructions?: string;
}

export type ToolSource =
  | { label: string; available: true; load(signal: AbortSignal): Promise<LoadedSource> }
  | { label: string; available: false; warning: Warning };

export interface ToolProvider {
  readonly name: string;
  /** Which `mcpServers` entries this provider answers for; entries no provider claims are reported unavailable. */
  claims(entry: McpServer): boolean;
  /**
   * The sources of this provider for the agent, given the entries it claimed. Cheap: it may read the database but
   * never calls out; loading (listing tools of a remote server) happens in `load`.
   */
  sources(agent: AgentToolConfig, claimed: McpServer[], scope: ToolScope): Promise<ToolSource[]>;
  /**
   * Whether the agent's other fields (not its `mcpServers` entries) give this provider sources. A provider without
   * it has none for an agent whose entries it claims none of, and is not asked (the registry runs on every read of
   * an agent, for its warnings).
   */
  sourcesBeyondEntries?(agent: AgentToolConfig): boolean;
}
