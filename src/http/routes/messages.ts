import type { Deps } from '../../deps.ts';
import { waitForMessage } from '../../domain/turns/message-wait.ts';
import { auditOf, orgOf } from '../auth.ts';
import { errorResponses, IdParams } from '../schemas/common.ts';
import {
  AcceptedMessage,
  AnswerBody,
  AnswerResult,
  InterruptResult,
  MessageCreateBody,
  MessageEnvelope,
  MessageGetQuery,
  MessageList,
  MessageListQuery,
  RequiredIdempotencyHeaders,
  SessionMessageParams,
} from '../schemas/messages.ts';
import type { App } from '../types.ts';

const tags = ['Sessions'];

export function messageRoutes(app: App, deps: Deps): void {
  app.route({
    method: 'GET',
    url: '/v1/sessions/:id/messages',
    config: { scopes: ['sessions:read'] },
    schema: {
      summary: 'List messages',
      description: 'The transcript in submission order.',
      tags,
      params: IdParams,
      querystring: MessageListQuery,
      response: { 200: MessageList, ...errorResponses(400, 401, 403, 404) },
    },
    handler: async (request) => deps.messages.list(orgOf(request), request.params.id.toLowerCase(), request.query),
  });

  app.route({
    method: 'POST',
    url: '/v1/sessions/:id/messages',
    config: { scopes: ['sessions:write'] },
    schema: {
      summary: 'Submit a message',
      description:
        'Accepts work for the session; it runs asynchronously, one turn at a time per session. Idempotency-Key is required: the same key and parts return the same message. An mcp_prompt part is filled in by prompts/get of the named MCP server of the session\'s agent (docs/tools.md "Prompts as message templates"): 400 naming parts[i].server, parts[i].name, parts[i].arguments.<name> or parts[i]; 502 mcp_server_unreachable when the server cannot be asked.',
      tags,
      params: IdParams,
      headers: RequiredIdempotencyHeaders,
      body: MessageCreateBody,
      response: { 202: AcceptedMessage, ...errorResponses(400, 401, 402, 403, 404, 409, 413, 502) },
    },
    handler: async (request, reply) => {
      const orgId = orgOf(request);
      const result = await deps.messages.submit(
        {
          orgId,
          sessionId: request.params.id.toLowerCase(),
          parts: request.body.parts,
          idempotencyKey: request.headers['idempotency-key'],
          ...(request.body.outputFormat === undefined ? {} : { outputFormat: request.body.outputFormat }),
        },
        (trx, agentId) => deps.agents.getIn(orgId, agentId, trx),
      );
      if (result.replayed) reply.header('idempotent-replayed', 'true');
      return reply.code(202).send(result.body);
    },
  });

  app.route({
    method: 'GET',
    url: '/v1/sessions/:id/messages/:messageId',
    config: { scopes: ['sessions:read'] },
    schema: {
      summary: 'Get a message',
      description:
        'The authoritative state of a message: status, response or error, and unresolved actions. With `wait` (seconds), answers as soon as the message is terminal or requires action, or when the wait ends (see docs/sessions.md "Waiting for a message").',
      tags,
      params: SessionMessageParams,
      querystring: MessageGetQuery,
      response: { 200: MessageEnvelope, ...errorResponses(400, 401, 403, 404) },
    },
    handler: async (request, reply) => {
      const orgId = orgOf(request);
      const sessionId = request.params.id.toLowerCase();
      const messageId = request.params.messageId.toLowerCase();
      const read = () => deps.messages.get(orgId, sessionId, messageId);
      const waitMs = (request.query.wait ?? 0) * 1000;
      if (waitMs === 0) return { message: await read() };
      // The response closes before it is sent only when the client went away: stop waiting then.
      const gone = new AbortController();
      const onClose = () => gone.abort();
      reply.raw.once('close', onClose);
      try {
        const message = await waitForMessage(
          {
            hub: deps.live,
            read,
            // A publication can be lost only between processes (cluster mode); there, re-read as streams check.
            recheckMs: deps.config.redisUrl === null ? null : deps.config.pollMs,
            signal: gone.signal,
          },
          sessionId,
          messageId,
          waitMs,
        );
        return { message };
      } finally {
        reply.raw.off('close', onClose);
      }
    },
  });

  app.route({
    method: 'POST',
    url: '/v1/sessions/:id/messages/:messageId/answer',
    config: { scopes: ['sessions:write'] },
    schema: {
      summary: 'Answer a question or decide a tool approval',
      description:
        'Answers an ask_user_question action (its actionId comes from the message or the message.event), or decides a tool_approval action with answer {approved: boolean, reason?: string} (400 naming the field otherwise; see docs/tools.md "Approvals"). 409 when the action is absent, belongs to another message or is no longer waiting (a decision is taken once).',
      tags,
      params: SessionMessageParams,
      body: AnswerBody,
      response: { 200: AnswerResult, ...errorResponses(400, 401, 403, 404, 409) },
    },
    handler: async (request) =>
      deps.messages.answer(
        orgOf(request),
        { sessionId: request.params.id.toLowerCase(), messageId: request.params.messageId.toLowerCase() },
        request.body.actionId,
        request.body.answer,
        auditOf(request),
      ),
  });

  app.route({
    method: 'POST',
    url: '/v1/sessions/:id/interrupt',
    config: { scopes: ['sessions:write'] },
    schema: {
      summary: 'Interrupt the active turn',
      description: 'interrupting when a turn is active (it ends cancelled within a second), no_turn otherwise.',
      tags,
      params: IdParams,
      response: { 200: InterruptResult, ...errorResponses(400, 401, 403, 404) },
    },
    handler: async (request) => deps.messages.interrupt(orgOf(request), request.params.id.toLowerCase()),
  });
}
