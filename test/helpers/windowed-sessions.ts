/**
 * Long sessions through the Responses API against a local model with a small window (context-window.test.ts,
 * compaction.test.ts): each exchange is an input the model answers with a call of `lookup`, then the call's large
 * output, which the model answers with text; some inputs may carry a file.
 */
import { expect } from 'vitest';
import { chunk, type Responder, sse, stubTokens, textReply, usageChunk } from './chat-completions-stub.ts';
import { type Harness, json } from './harness.ts';

export const LOOKUP = {
  type: 'function',
  name: 'lookup',
  description: 'Looks something up',
  parameters: { type: 'object', properties: {}, additionalProperties: false },
};

/**
 * The stub's answer: a call of `lookup` to a user input, a short text to the call's output; the usage reports the
 * input tokens as the stub counts them (`charsPerToken` characters a token).
 */
export const agentLoop =
  (charsPerToken = 4) =>
  (body: Record<string, unknown>): Responder => {
    const messages = body.messages as { role: string }[];
    const usage = usageChunk(stubTokens(body, charsPerToken), 5);
    if (messages.at(-1)?.role === 'tool') return textReply(['noted'], usage);
    const id = `call_${messages.length}_${Math.random().toString(36).slice(2, 8)}`;
    return sse([
      chunk({ role: 'assistant', content: null }),
      chunk({ tool_calls: [{ index: 0, id, type: 'function', function: { name: 'lookup', arguments: '{}' } }] }),
      chunk({}, 'tool_calls'),
      usage,
    ]);
  };
export function windowedSessions(harness: () => Harness) {
  async function createAgent(fields: Record<string, unknown> = {}): Promise<string> {
    const created = await harness().request('POST', '/v1/agents', {
      body: { name: 'reader', model: 'stub/m', ...fields },
    });
    expect(created.status, created.text).toBe(201);
    return json(created).agent.id;
  }

  const respond = (body: Record<string, unknown>) =>
    harness().request('POST', '/v1/responses', {
      body: { tools: [LOOKUP], ...body },
      headers: { 'agentry-compat': 'openai' },
    });

  /**
   * One exchange: an input the model answers with a call, then the call's large output (20k characters). With
   * `fileId`, the input carries that file (`input_file`) beside its text.
   */
  async function exchange(agentId: string, previous: string | null, index: number, extra = {}, fileId?: string) {
    const text = `question ${index}`;
    const input =
      fileId === undefined
        ? text
        : [
            {
              role: 'user',
              content: [
                { type: 'input_text', text },
                { type: 'input_file', file_id: fileId },
              ],
            },
          ];
    const asked = json(await respond({ model: agentId, input, previous_response_id: previous, ...extra }));
    const call = asked.output?.find((item: { type: string }) => item.type === 'function_call');
    if (asked.status !== 'completed' || call === undefined) return { failed: 1, last: asked };
    const output = `${index}:${'y'.repeat(20_000)}`;
    const answered = json(
      await respond({
        model: agentId,
        previous_response_id: asked.id,
        input: [{ type: 'function_call_output', call_id: call.call_id, output }],
        ...extra,
      }),
    );
    return { failed: answered.status === 'completed' ? 0 : 1, last: answered };
  }

  return { createAgent, respond, exchange };
}
