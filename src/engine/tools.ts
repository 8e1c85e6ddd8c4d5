/**
 * The tools a turn offers the model, and how each call is answered: client tools end the turn for the API caller,
 * `ask_user_question` suspends it for a person, server tools run here. Unknown names get an error result so the
 * model can recover instead of the turn failing.
 */
import type { AgentConfig } from '../domain/agents/agent-types.ts';
import type { CallKind } from '../domain/messages/items.ts';
import { ASK_USER_QUESTION } from '../models/scripted.ts';
import type { ToolSpec } from '../models/types.ts';

export interface ServerTool {
  spec: ToolSpec;
  /** Returns the tool's output text; throws to report a tool error to the model. */
  execute(args: unknown, signal: AbortSignal): Promise<string>;
}

const ASK_USER_QUESTION_SPEC: ToolSpec = {
  name: ASK_USER_QUESTION,
  description: 'Ask the user a question and wait for their answer. Use it when you cannot proceed without their input.',
  parameters: {
    type: 'object',
    properties: {
      question: { type: 'string', description: 'The question to ask' },
      options: { type: 'array', items: { type: 'string' }, description: 'Suggested answers, if any' },
    },
    required: ['question'],
    additionalProperties: false,
  },
  strict: false,
};

export interface TurnTools {
  specs: ToolSpec[];
  kindOf(name: string): CallKind;
  server(name: string): ServerTool | undefined;
}

export function toolsFor(config: AgentConfig, serverTools: ReadonlyMap<string, ServerTool> = new Map()): TurnTools {
  const clientNames = new Set(config.clientTools.map((tool) => tool.name));
  const offersQuestions = config.mcpServers.some(
    (server) => !('type' in server) && server.kind === 'internal' && server.name === ASK_USER_QUESTION,
  );
  const specs: ToolSpec[] = [
    ...config.clientTools.map((tool) => ({
      name: tool.name,
      description: tool.description,
      parameters: tool.parameters,
      strict: tool.strict,
    })),
    ...(offersQuestions ? [ASK_USER_QUESTION_SPEC] : []),
    ...[...serverTools.values()].map((tool) => tool.spec),
  ];
  return {
    specs,
    kindOf: (name) => (clientNames.has(name) ? 'client' : name === ASK_USER_QUESTION ? 'question' : 'server'),
    server: (name) => serverTools.get(name),
  };
}
