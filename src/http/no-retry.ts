import type { FastifyReply, FastifyRequest } from 'fastify';

/**
 * onSend hook for writes that a blind client retry could repeat (OpenAI clients retry 409 and 5xx by default):
 * `x-should-retry: false` tells them not to.
 */
export async function noClientRetry(_request: FastifyRequest, reply: FastifyReply, payload: unknown): Promise<unknown> {
  if (reply.statusCode === 409 || reply.statusCode >= 500) reply.header('x-should-retry', 'false');
  return payload;
}
