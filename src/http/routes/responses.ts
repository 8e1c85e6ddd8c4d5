/**
 * POST /v1/responses and the routes around a Response (retrieve, input items, cancel, delete). The validation mode
 * and the stream's vendor events depend on the client (client-mode.ts).
 */
import type { FastifyReply, FastifyRequest } from 'fastify';
import { Type } from 'typebox';
import type { Deps } from '../../deps.ts';
import type { ResponseStreamWireEvent } from '../../domain/responses/response-events.ts';
import {
  parseResponseRequest,
  type ResponseRequest,
  responseIdToMessage,
} from '../../domain/responses/response-request.ts';
import { isFinalEvent } from '../../domain/responses/response-stream.ts';
import { validationError } from '../../errors/app-error.ts';
import { auditOf, orgOf } from '../auth.ts';
import { ignoreEmptyJsonBody } from '../bodiless.ts';
import { compatModeOf, vendorEventsWanted } from '../client-mode.ts';
import { noClientRetry } from '../no-retry.ts';
import { type ResponseBodyKind, responsesValidatorCompiler, validateResponseBody } from '../responses-body.ts';
import { errorResponses, VISIBLE_ASCII } from '../schemas/common.ts';
import { CompactionItem, ConversationItemList, ItemListQuery } from '../schemas/conversations.ts';
import { OutputFormatView } from '../schemas/output-format.ts';
import { ResponseCompactBody, ResponseCreateBody } from '../schemas/responses.ts';
import { streamSse } from '../sse.ts';
import type { App } from '../types.ts';

const tags = ['Responses'];

const ResponseObject = Type.Object(
  {
    id: Type.String({ description: 'resp_ + the message id' }),
    object: Type.Literal('response'),
    status: Type.String(),
    output: Type.Array(Type.Unknown()),
    output_text: Type.String(),
    conversation: Type.Object({ id: Type.String() }),
    tools: Type.Array(Type.Record(Type.String(), Type.Unknown()), {
      description: 'function tools (answered by the caller) and mcp tools (run by the service)',
    }),
    temperature: Type.Number(),
    top_p: Type.Number(),
    background: Type.Boolean({ description: 'As requested: true for a Response answered at once and run on' }),
    store: Type.Boolean({ description: 'As requested: false for a Response that is not kept once answered' }),
    text: Type.Object(
      { format: OutputFormatView },
      { additionalProperties: true, description: 'The output format the turn ran with; {"type":"text"} for free text' },
    ),
  },
  {
    additionalProperties: true,
    description:
      'A Response in the OpenAI Responses format, with every field Open Responses requires (see docs/responses.md)',
  },
);

const ResponseParams = Type.Object({
  id: Type.String({
    pattern: '^resp_[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$',
    description: 'resp_ + the message id',
  }),
});

const ResponseDeleted = Type.Object(
  { id: Type.String(), object: Type.Literal('response'), deleted: Type.Literal(true) },
  { additionalProperties: false },
);

const CompactedResponseSchema = Type.Object(
  {
    id: Type.String({ description: 'resp_ + a new id; not a stored Response' }),
    object: Type.Literal('response.compaction'),
    created_at: Type.Integer({ description: 'Unix time, seconds' }),
    output: Type.Array(
      Type.Union([
        Type.Object(
          {
            id: Type.String(),
            type: Type.Literal('message'),
            role: Type.Literal('user'),
            status: Type.Literal('completed'),
            content: Type.Array(Type.Object({ type: Type.Literal('input_text'), text: Type.String() })),
          },
          { additionalProperties: false },
        ),
        CompactionItem,
      ]),
      { description: 'The user messages since the last compaction, then one compaction item' },
    ),
    usage: Type.Object({
      input_tokens: Type.Integer({ minimum: 0 }),
      input_tokens_details: Type.Object({ cached_tokens: Type.Integer({ minimum: 0 }) }),
      output_tokens: Type.Integer({ minimum: 0 }),
      output_tokens_details: Type.Object({ reasoning_tokens: Type.Integer({ minimum: 0 }) }),
      total_tokens: Type.Integer({ minimum: 0 }),
    }),
  },
  { additionalProperties: false },
);

const ResponseHeaders = Type.Object({
  'idempotency-key': Type.Optional(Type.String({ minLength: 1, maxLength: 255, pattern: VISIBLE_ASCII })),
  'agentry-compat': Type.Optional(
    Type.Unsafe<'openai' | 'strict'>({
      type: 'string',
      enum: ['openai', 'strict'],
      description:
        'openai accepts what OpenAI clients send; strict the spec body only. Default: the API key setting, then AGENTRY_RESPONSES_COMPAT (auto, the default: openai for every client)',
    }),
  ),
  'agentry-stream-events': Type.Optional(
    Type.Unsafe<'standard' | 'all'>({
      type: 'string',
      enum: ['standard', 'all'],
      description:
        'standard leaves out response.agentry_tool_call.* events; all keeps them. Default: all, except for SDK stream helpers (X-Stainless-Helper-Method) and when AGENTRY_RESPONSES_STREAM_EVENTS=standard',
    }),
  ),
});

const RetrieveQuery = Type.Object(
  {
    stream: Type.Optional(
      Type.Boolean({
        description:
          'true: stream the Response as the events of its stream (stored ones replayed, then live until the final event), ending with [DONE]',
      }),
    ),
    starting_after: Type.Optional(
      Type.Integer({
        minimum: 0,
        description:
          'With stream=true: only the events whose sequence_number is greater (resume a broken stream with the last one seen)',
      }),
    ),
    include: Type.Optional(
      Type.Array(Type.String({ maxLength: 200 }), { maxItems: 32, description: 'Accepted and ignored' }),
    ),
    include_obfuscation: Type.Optional(Type.Boolean({ description: 'Accepted and ignored (no obfuscation is added)' })),
  },
  { additionalProperties: false },
);

/**
 * Streams a Response's numbered events as Server-Sent Events, each named by its type, then `data: [DONE]`. A
 * closed connection (or a shutdown) ends the iteration, which unsubscribes; the turn goes on.
 */
async function streamEvents(reply: FastifyReply, deps: Deps, events: AsyncIterable<ResponseStreamWireEvent>) {
  await streamSse(reply, deps, { surface: 'responses', heartbeat: 'ping' }, (stream) =>
    stream.pipe(events, (event) => {
      const { type, sequence_number, ...fields } = event;
      stream.send({ event: type, data: { type, sequence_number, ...fields } });
      if (!isFinalEvent(event)) return true;
      stream.data('[DONE]');
      return false;
    }),
  );
  return reply;
}

/** The body in the request's mode (echoed in the Agentry-Compat response header), validated and parsed. */
function parseBody(
  request: FastifyRequest,
  reply: FastifyReply,
  deps: Deps,
  kind: ResponseBodyKind = 'create',
): ResponseRequest {
  const mode = compatModeOf(request, deps.config.responsesCompat);
  reply.header('agentry-compat', mode);
  validateResponseBody(request.body, mode, kind);
  return parseResponseRequest(request.body, mode === 'openai');
}

export function responseRoutes(app: App, deps: Deps): void {
  app.route({
    method: 'POST',
    url: '/v1/responses',
    config: { scopes: ['sessions:write', 'sessions:read'] },
    schema: {
      summary: 'Create a response',
      description:
        'Runs the agent named by `model` on a Conversation (a new one unless `conversation` is given) and returns the Response, or streams it as Responses events (`stream: true`) ending with `data: [DONE]`. `background: true` answers at once with the Response `queued` while the turn runs on; `store: false` answers without keeping the Response (its conversation is deleted when the request is over).',
      tags,
      headers: ResponseHeaders,
      body: ResponseCreateBody,
      response: {
        200: Type.Unsafe({
          description: 'The Response; with stream: true, Responses events as Server-Sent Events ending with [DONE]',
          content: {
            'application/json': { schema: ResponseObject },
            'text/event-stream': { schema: { type: 'string' } },
          },
        }),
        ...errorResponses(400, 401, 402, 403, 404, 409, 413, 504),
      },
    },
    // The body's schema depends on the request's mode: validateResponseBody picks it in the handler.
    validatorCompiler: responsesValidatorCompiler,
    // A retry of a POST that failed after the turn was accepted could run it twice: tell OpenAI clients not to.
    onSend: noClientRetry,
    handler: async (request, reply) => {
      const parsed = parseBody(request, reply, deps);
      const orgId = orgOf(request);
      const key = request.headers['idempotency-key'];
      if (parsed.background && !parsed.stream) {
        const queued = await deps.responses.startInBackground(orgId, parsed, key, auditOf(request));
        if (queued.replayed) reply.header('idempotent-replayed', 'true');
        return queued.response;
      }
      const started = await deps.responses.start(orgId, parsed, key, {
        audit: auditOf(request),
        vendorEvents: parsed.stream && vendorEventsWanted(request, deps.config.responsesStreamEvents),
      });
      if (started.replayed) reply.header('idempotent-replayed', 'true');
      // A Response with store: false is forgotten once its request is over, however it ended.
      try {
        if (!parsed.stream) return await deps.responses.finish(started, deps.config.responsesSyncTimeoutMs);
        return await streamEvents(reply, deps, started.events);
      } finally {
        await deps.responses.forget(orgId, started.message);
      }
    },
  });

  app.route({
    method: 'POST',
    url: '/v1/responses/input_tokens',
    config: { scopes: ['sessions:read'] },
    schema: {
      summary: 'Count input tokens',
      description:
        'An estimate of the input tokens a Response to this body would start with (the body of POST /v1/responses; nothing runs): the instructions, function tools, conversation log and input, at one token per 4 characters plus 85 per image or file (docs/responses.md).',
      tags,
      headers: ResponseHeaders,
      body: ResponseCreateBody,
      response: {
        200: Type.Object(
          { object: Type.Literal('response.input_tokens'), input_tokens: Type.Integer({ minimum: 0 }) },
          { additionalProperties: false },
        ),
        ...errorResponses(400, 401, 403, 404),
      },
    },
    validatorCompiler: responsesValidatorCompiler,
    handler: async (request, reply) => deps.responses.inputTokens(orgOf(request), parseBody(request, reply, deps)),
  });

  app.route({
    method: 'POST',
    url: '/v1/responses/compact',
    config: { scopes: ['sessions:write'] },
    schema: {
      summary: 'Compact a conversation',
      description:
        "The conversation the body names (previous_response_id or conversation, then input; the body of POST /v1/responses, of which stream, background and store have no effect here) summarised by the agent's model: the user messages, then one compaction item. Nothing is stored; send the output back as the input of the next Response, whose turn reads the summary instead of what precedes it. The summary's cost is taken off the credits (docs/context.md).",
      tags,
      headers: ResponseHeaders,
      body: ResponseCompactBody,
      response: { 200: CompactedResponseSchema, ...errorResponses(400, 401, 402, 403, 404, 502) },
    },
    validatorCompiler: responsesValidatorCompiler,
    handler: async (request, reply) => {
      const body = parseBody(request, reply, deps, 'compact');
      const abort = new AbortController();
      const onClose = () => {
        if (!reply.raw.writableEnded) abort.abort(new Error('the client closed the connection'));
      };
      reply.raw.once('close', onClose);
      try {
        return await deps.responses.compact(orgOf(request), body, abort.signal);
      } finally {
        reply.raw.off('close', onClose);
      }
    },
  });

  app.route({
    method: 'GET',
    url: '/v1/responses/:id',
    config: { scopes: ['sessions:read'] },
    schema: {
      summary: 'Get a response',
      description:
        'The Response projected from its durable message; with stream=true, the events of its stream (numbered as when it was created, after starting_after) ending with [DONE]. A Response created with store: false is not found.',
      tags,
      params: ResponseParams,
      querystring: RetrieveQuery,
      response: {
        200: Type.Unsafe({
          description: 'The Response; with stream=true, Responses events as Server-Sent Events ending with [DONE]',
          content: {
            'application/json': { schema: ResponseObject },
            'text/event-stream': { schema: { type: 'string' } },
          },
        }),
        ...errorResponses(400, 401, 403, 404),
      },
    },
    handler: async (request, reply) => {
      const orgId = orgOf(request);
      const messageId = responseIdToMessage(request.params.id, 'id');
      const { stream, starting_after: startingAfter } = request.query;
      if (stream !== true) {
        if (startingAfter !== undefined) throw validationError('starting_after', 'starting_after needs stream=true');
        return deps.responses.get(orgId, messageId);
      }
      const events = await deps.responses.retrieve(orgId, messageId, {
        vendorEvents: vendorEventsWanted(request, deps.config.responsesStreamEvents),
        startingAfter: startingAfter ?? null,
      });
      return streamEvents(reply, deps, events);
    },
  });

  app.route({
    method: 'GET',
    url: '/v1/responses/:id/input_items',
    config: { scopes: ['sessions:read'] },
    schema: {
      summary: 'List the input items of a response',
      description:
        'The items the Response took as input: its user input and any history replayed with it, in OpenAI item shapes. Newest first by default; page with after = last_id while has_more is true.',
      tags,
      params: ResponseParams,
      querystring: ItemListQuery,
      response: { 200: ConversationItemList, ...errorResponses(400, 401, 403, 404) },
    },
    handler: async (request) => {
      const { limit, order, after } = request.query;
      return deps.responses.inputItems(
        orgOf(request),
        responseIdToMessage(request.params.id, 'id'),
        after === undefined ? { limit, order } : { limit, order, after },
      );
    },
  });

  app.route({
    method: 'POST',
    url: '/v1/responses/:id/cancel',
    config: { scopes: ['sessions:write'] },
    schema: {
      summary: 'Cancel a response',
      description:
        'Interrupts the turn of the Response, background or not (a queued or waiting turn at once, a running one within about a second) and returns the Response, `cancelled` once the turn stopped. A finished Response is returned as it is.',
      tags,
      params: ResponseParams,
      response: { 200: ResponseObject, ...errorResponses(400, 401, 403, 404) },
    },
    onRequest: ignoreEmptyJsonBody,
    handler: async (request) => deps.responses.cancel(orgOf(request), responseIdToMessage(request.params.id, 'id')),
  });

  app.route({
    method: 'DELETE',
    url: '/v1/responses/:id',
    config: { scopes: ['sessions:write'] },
    schema: {
      summary: 'Delete a response',
      description:
        'Removes the Response: GET /v1/responses/{id} answers 404 afterwards. An unfinished turn is cancelled first. Its items stay in the Conversation, and its message in the Session.',
      tags,
      params: ResponseParams,
      response: { 200: ResponseDeleted, ...errorResponses(400, 401, 403, 404) },
    },
    onRequest: ignoreEmptyJsonBody,
    handler: async (request) => deps.responses.remove(orgOf(request), responseIdToMessage(request.params.id, 'id')),
  });
}
