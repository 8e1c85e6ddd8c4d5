/**
 * `ask_user_question` (internal entry `{kind:"internal", name:"ask_user_question"}`): the model asks a person and
 * the turn suspends durably, holding no worker, until the answer route resumes it. It has no `execute`: the
 * engine turns its calls into required actions.
 */
import { ASK_USER_QUESTION } from '../events/session-values.ts';
import { builtinOrigin } from './registry.ts';
import type { ResolvedTool, ToolProvider } from './types.ts';

export { ASK_USER_QUESTION };

/** The tool as the model sees it; the Responses surface lists it among a response's function tools. */
export const QUESTION_TOOL: ResolvedTool = {
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
  kind: 'question',
  origin: builtinOrigin(ASK_USER_QUESTION),
  fixedName: true,
};

export function createQuestionProvider(): ToolProvider {
  return {
    name: 'question',
    claims: (entry) => !('type' in entry) && entry.kind === 'internal' && entry.name === ASK_USER_QUESTION,
    async sources(_agent, claimed) {
      if (claimed.length === 0) return [];
      return [
        {
          label: `internal tool "${ASK_USER_QUESTION}"`,
          available: true,
          load: async () => ({ tools: [QUESTION_TOOL] }),
        },
      ];
    },
  };
}
