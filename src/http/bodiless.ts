import type { FastifyRequest } from 'fastify';

/**
 * onRequest hook for routes that take no body. openai-python sends `Content-Type: application/json` on every
 * request, also on its bodiless DELETE and POST calls (`conversations.delete`, `responses.delete`,
 * `responses.cancel`), which would otherwise be refused as an empty JSON body. An empty body is no body here.
 */
export async function ignoreEmptyJsonBody(request: FastifyRequest): Promise<void> {
  const length = request.headers['content-length'];
  const empty = request.headers['transfer-encoding'] === undefined && (length === undefined || length === '0');
  if (empty) delete request.headers['content-type'];
}
