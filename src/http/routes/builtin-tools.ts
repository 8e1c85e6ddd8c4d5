/**
 * GET /v1/tools/builtin: the built-in tools an agent may list (`{"kind":"internal","name":…}`) and whether this
 * deployment can run each, with the reason when it cannot (docs/tools.md). The answer comes from the tool registry
 * itself, asked about an agent with that one tool: the same answer that makes an agent's `warnings`, so the console
 * can say before a tool is chosen what an agent would be warned of after.
 */
import { Type } from 'typebox';
import type { Deps } from '../../deps.ts';
import { DEFAULT_TOOL_APPROVALS, INTERNAL_TOOLS, type InternalTool } from '../../tools/tool-config.ts';
import { orgOf } from '../auth.ts';
import { errorResponses, StringEnum } from '../schemas/common.ts';
import type { App } from '../types.ts';

/** What each built-in gives an agent, in a line. */
const DESCRIPTIONS: Record<InternalTool, string> = {
  'web_search_&_browse': 'web_browse reads a web page as text; web_search searches the web',
  sandbox: 'sandbox_run, sandbox_read_file, sandbox_write_file, sandbox_list_files: commands and files in a sandbox',
  skills: "Loads the agent's skills into its sandbox",
  coding_agent: 'A coding agent',
  ask_user_question: 'ask_user_question: the agent asks the person a question and waits for the answer',
  report_builder: 'build_report: writes a report file from the turn',
  company: 'Company data',
  app_builder_contract: 'An app builder',
  github: 'GitHub',
  sound_studio: 'Sound generation',
  speech_generator: 'Speech generation',
  http_client: 'http_request: HTTP requests to the destinations the network policy allows',
  memory: 'memory: notes the agent keeps across sessions',
};

/** Warnings that mean the tool, or part of it, cannot run here (not those about how an agent configures it). */
const UNAVAILABLE = new Set(['tool_unavailable']);

const BuiltinTool = Type.Object(
  {
    object: Type.Literal('builtin_tool'),
    name: StringEnum(INTERNAL_TOOLS, 'The name an internal mcpServers entry gives'),
    description: Type.String(),
    available: Type.Boolean({ description: 'false: this deployment cannot run it; an agent listing it is warned' }),
    reason: Type.Union([Type.String(), Type.Null()], {
      description:
        'Why it cannot run here, or which part of it cannot (web_search without a search provider); null: all of it runs',
    }),
  },
  { additionalProperties: false },
);

const BuiltinToolList = Type.Object(
  { object: Type.Literal('list'), data: Type.Array(BuiltinTool) },
  { additionalProperties: false, description: 'Every built-in tool, in the order of the agent schema' },
);

export function builtinToolRoutes(app: App, deps: Deps): void {
  app.route({
    method: 'GET',
    url: '/v1/tools/builtin',
    config: { scopes: ['agents:read'] },
    schema: {
      summary: 'List the built-in tools',
      description:
        "The built-in tools an agent may list as internal mcpServers entries, whether this deployment can run each, and why not (bubblewrap missing for the sandbox tools, a tool this deployment does not have): the reasons an agent's warnings would give. Needs agents:read.",
      tags: ['Agents'],
      response: { 200: BuiltinToolList, ...errorResponses(401, 403) },
    },
    handler: async (request) => {
      const scope = { orgId: orgOf(request), agentId: '', db: deps.storage.db };
      const data = await Promise.all(
        INTERNAL_TOOLS.map(async (name) => {
          const sources = await deps.tools.sources(
            {
              mcpServers: [{ kind: 'internal', name }],
              clientTools: [],
              skills: [],
              networkPolicy: null,
              toolApprovals: DEFAULT_TOOL_APPROVALS,
            },
            scope,
          );
          const missing = sources.flatMap((source) =>
            !source.available && UNAVAILABLE.has(source.warning.code) ? [source.warning.message] : [],
          );
          return {
            object: 'builtin_tool' as const,
            name,
            description: DESCRIPTIONS[name],
            available: sources.length === 0 || sources.some((source) => source.available),
            reason: missing.length === 0 ? null : missing.join('; '),
          };
        }),
      );
      return { object: 'list' as const, data };
    },
  });
}
