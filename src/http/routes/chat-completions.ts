/**
 * POST /v1/chat/completions: OpenAI's Chat Completions API in front of an agent's turn (domain/chat-completions/).
 * Answers the `chat.completion`, or streams `chat.completion.chunk`s ending with `data: [DONE]`.
 */
import { Type } from 'typebox';
import type { Deps } from '../../deps.ts';
import { parseChatRequest } from '../../domain/chat-completions/chat-request.ts';
import { orgOf } from '../auth.ts';
import { noClientRetry } from '../no-retry.ts';
import { ChatCompletionCreateBody } from '../schemas/chat-completions.ts';
import { errorResponses } from '../schemas/common.ts';
import { streamSse } from '../sse.ts';
import type { App } from '../types.ts';

const ChatCompletionObject = Type.Object(
  {
    id: Type.String({ description: 'chatcmpl- + the id of the turn (message)' }),
    object: Type.Literal('chat.completion'),
    created: Type.Integer({ description: 'Unix seconds' }),
    model: Type.String({ description: '`model` as sent' }),
    choices: Type.Array(
      Type.Object(
        {
          index: Type.Literal(0),
          message: Type.Object(
            {
              role: Type.Literal('assistant'),
              content: Type.Union([Type.String(), Type.Null()]),
              refusal: Type.Null(),
              tool_calls: Type.Optional(
                Type.Array(
                  Type.Object({
                    id: Type.String(),
                    type: Type.Literal('function'),
                    function: Type.Object({ name: Type.String(), arguments: Type.String() }),
                  }),
                ),
              ),
            },
            { additionalProperties: false },
          ),
          logprobs: Type.Null(),
          finish_reason: Type.Union([
            Type.Literal('stop'),
            Type.Literal('tool_calls'),
            Type.Literal('length'),
            Type.Literal('content_filter'),
          ]),
        },
        { additionalProperties: false },
      ),
      { minItems: 1, maxItems: 1 },
    ),
    usage: Type.Object(
      {
        prompt_tokens: Type.Integer(),
        completion_tokens: Type.Integer(),
        total_tokens: Type.Integer(),
      },
      { additionalProperties: true, description: 'Tokens of every model call of the turn' },
    ),
  },
  { additionalProperties: true, description: 'A chat completion in the OpenAI Chat Completions format' },
);

export function chatCompletionRoutes(app: App, deps: Deps): void {
  app.route({
    method: 'POST',
    url: '/v1/chat/completions',
    config: { scopes: ['sessions:write', 'sessions:read'], openaiParameters: true },
    schema: {
      summary: 'Create a chat completion',
      description:
        "Runs one turn of the agent named by `model` on the conversation in `messages` (a new hidden session each call, recorded as a Run with source `chat_completions`) and returns the assistant message, or streams `chat.completion.chunk`s (`stream: true`) ending with `data: [DONE]`. Function `tools` are answered by the caller: a call ends the completion with finish_reason `tool_calls`; the agent's own tools run inside the turn. See docs/chat-completions.md.",
      tags: ['Chat Completions'],
      body: ChatCompletionCreateBody,
      response: {
        200: Type.Unsafe({
          description:
            'The chat completion; with stream: true, chat.completion.chunk objects as Server-Sent Events ending with [DONE]',
          content: {
            'application/json': { schema: ChatCompletionObject },
            'text/event-stream': { schema: { type: 'string' } },
          },
        }),
        ...errorResponses(400, 401, 402, 403, 404, 413, 502, 504),
      },
    },
    // A retry of a POST that failed after the turn was accepted would run it twice: tell OpenAI clients not to.
    onSend: noClientRetry,
    handler: async (request, reply) => {
      const parsed = parseChatRequest(request.body);
      const started = await deps.chatCompletions.start(orgOf(request), parsed);
      try {
        if (!parsed.stream) return await deps.chatCompletions.finish(started, deps.config.responsesSyncTimeoutMs);
        // Each chunk as a bare `data:` frame, then `data: [DONE]`. A closed connection (or a shutdown) ends the
        // iteration, which unsubscribes; the turn goes on.
        await streamSse(reply, deps, { surface: 'chat_completions', heartbeat: 'ping' }, async (stream) => {
          await stream.pipe(deps.chatCompletions.chunks(started, parsed.includeUsage), (chunk) =>
            stream.send({ data: chunk }),
          );
          if (!stream.closed) stream.data('[DONE]');
        });
        return reply;
      } finally {
        // However the request ended (answered, client gone, timed out), a turn that stops for the client's tool
        // calls is handed back rather than left waiting in its hidden session; the turn itself goes on.
        deps.chatCompletions
          .settle(started)
          .catch((error: unknown) => request.log.error({ err: error }, 'chat completion not settled'));
      }
    },
  });
}
