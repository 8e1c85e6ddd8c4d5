/**
 * The one place errors become HTTP responses. Every body has the shape
 * {"error":{"code","message","type","param"}}; status and type come from the catalog. A database that cannot be
 * reached is 503 with Retry-After (the request may succeed in a moment). Unexpected errors are logged with their
 * stack and answered with a generic 500 that names only the request id.
 */
import type { FastifyError, FastifyReply, FastifyRequest } from 'fastify';
import { AppError } from '../errors/app-error.ts';
import { type ErrorCode, errorCatalog } from '../errors/catalog.ts';
import { isDatabaseUnavailable, isStorageFull } from '../storage/errors.ts';
import { describeValidationError, isUnknownTopLevelField, unknownParameter } from './validation.ts';

export interface ErrorBody {
  error: { code: ErrorCode; message: string; type: string; param: string | null; details?: Record<string, unknown> };
}

export function errorBody(
  code: ErrorCode,
  message: string,
  param: string | null = null,
  details: Record<string, unknown> | null = null,
): ErrorBody {
  const error = { code, message, type: errorCatalog[code].type, param };
  return { error: details === null ? error : { ...error, details } };
}

/** What a client is told when a write fails, or is refused, because the disk is full. */
export const STORAGE_FULL_MESSAGE =
  "The server's storage is full: nothing was written. Reads still work; retry writes after Retry-After";

/** The older API under this prefix answers errors in its own form (docs/legacy.md). */
export const OLDER_API_PREFIX = '/api/sdk';

/**
 * The older API's error `type` (Dust style): `<resource>_not_found` for a missing resource, the older names for
 * authentication and server errors, and the catalog code otherwise.
 */
export function olderErrorType(code: ErrorCode, message: string, param: string | null): string {
  if (code === 'not_found') {
    if (param === 'version') return 'version_not_found';
    const resource = /^([a-z]+) /.exec(message)?.[1];
    return resource === undefined ? 'not_found' : `${resource}_not_found`;
  }
  if (code === 'missing_api_key') return 'malformed_authorization_header_error';
  if (code === 'invalid_api_key') return 'not_authenticated';
  if (code === 'validation_error' || code === 'invalid_json') return 'invalid_request_error';
  if (errorCatalog[code].status >= 500) return 'internal_server_error';
  return code;
}

function send(
  reply: FastifyReply,
  code: ErrorCode,
  message: string,
  param: string | null = null,
  details: Record<string, unknown> | null = null,
): FastifyReply {
  const path = reply.request.url;
  const older = path === OLDER_API_PREFIX || path.startsWith(`${OLDER_API_PREFIX}/`);
  return reply
    .code(errorCatalog[code].status)
    .type('application/json; charset=utf-8')
    .send(
      older
        ? { error: { type: olderErrorType(code, message, param), message, code, param } }
        : errorBody(code, message, param, details),
    );
}

/** Seconds a client is asked to wait (Retry-After) before trying again while the database is unreachable. */
export const DATABASE_RETRY_AFTER_S = 2;

/** The 503 of a database that cannot be reached, with its Retry-After header set on `reply`. */
export function databaseUnavailable(reply: FastifyReply, cause: unknown): AppError {
  reply.header('retry-after', String(DATABASE_RETRY_AFTER_S));
  return new AppError('service_unavailable', 'the database cannot be reached right now; try again shortly', { cause });
}

/** Fastify's own 4xx conditions, which it raises before a handler runs. */
function fromFastify(error: FastifyError): { code: ErrorCode; message: string; param: string | null } | null {
  switch (error.code) {
    case 'FST_ERR_CTP_INVALID_JSON_BODY':
      return { code: 'invalid_json', message: 'Request body is not valid JSON', param: 'body' };
    case 'FST_ERR_CTP_EMPTY_JSON_BODY':
      return {
        code: 'invalid_json',
        message: 'Request body is empty but Content-Type is application/json',
        param: 'body',
      };
    case 'FST_ERR_CTP_INVALID_MEDIA_TYPE':
    case 'FST_ERR_CTP_INVALID_CONTENT_LENGTH':
      return {
        code: 'unsupported_content_type',
        message: 'Content-Type must be application/json for this route',
        param: 'Content-Type',
      };
    case 'FST_ERR_CTP_BODY_TOO_LARGE':
      return { code: 'payload_too_large', message: 'Request body is larger than the configured limit', param: 'body' };
    case 'FST_ERR_CTP_INVALID_TYPE':
      return { code: 'unsupported_content_type', message: 'Content-Type header is invalid', param: 'Content-Type' };
    default:
      break;
  }
  if (error instanceof SyntaxError && error.statusCode === 400) {
    return { code: 'invalid_json', message: `Request body is not valid JSON: ${error.message}`, param: 'body' };
  }
  if (error.statusCode === 413) return { code: 'payload_too_large', message: error.message, param: 'body' };
  if (error.statusCode !== undefined && error.statusCode >= 400 && error.statusCode < 500) {
    return { code: 'validation_error', message: error.message, param: null };
  }
  return null;
}

export function handleError(error: FastifyError | AppError | Error, request: FastifyRequest, reply: FastifyReply) {
  // No route matched: whatever went wrong with the body, the answer is that the route does not exist.
  if (request.is404) return handleNotFound(request, reply);
  if (isStorageFull(error)) {
    request.log.debug({ err: error }, 'write failed for lack of space');
    return send(reply, 'insufficient_storage', STORAGE_FULL_MESSAGE);
  }
  if (error instanceof AppError) {
    // A probe's 503 is the state it reports, not a failure; a lack of space is logged once per episode
    // (storage/storage-space.ts), not per refused request.
    const quiet = request.routeOptions.config?.probe === true || error.code === 'insufficient_storage';
    if (errorCatalog[error.code].status >= 500 && !quiet) request.log.error({ err: error }, 'request failed');
    return send(reply, error.code, error.message, error.param, error.details);
  }
  const fastifyError = error as FastifyError;
  if (fastifyError.validation !== undefined && fastifyError.validation.length > 0) {
    const [first] = fastifyError.validation;
    if (first !== undefined) {
      const problem = describeValidationError(
        { ...first, instancePath: first.instancePath, schemaPath: first.schemaPath, params: first.params ?? {} },
        fastifyError.validationContext,
      );
      const openai =
        request.routeOptions.config?.openaiParameters === true &&
        fastifyError.validationContext === 'body' &&
        isUnknownTopLevelField(first);
      return send(reply, 'validation_error', openai ? unknownParameter(problem.param) : problem.message, problem.param);
    }
  }
  const known = fromFastify(fastifyError);
  if (known !== null) return send(reply, known.code, known.message, known.param);
  if (isDatabaseUnavailable(error)) {
    const unavailable = databaseUnavailable(reply, error);
    request.log.warn({ err: error }, 'request failed: the database cannot be reached');
    return send(reply, unavailable.code, unavailable.message);
  }
  request.log.error({ err: error }, 'unhandled error');
  return send(reply, 'internal_error', `Internal server error (request ${request.id})`);
}

export function handleNotFound(request: FastifyRequest, reply: FastifyReply) {
  const path = request.url.split('?')[0] ?? request.url;
  return send(reply, 'route_not_found', `No route ${request.method} ${path}`);
}

/**
 * Errors the router raises before any route is chosen (a path that is not valid percent-encoding, a parameter
 * longer than the router's limit), answered with the standard body instead of the framework's own.
 */
export function handleFrameworkError(error: FastifyError, request: FastifyRequest, reply: FastifyReply) {
  if (error.code === 'FST_ERR_BAD_URL') {
    return send(reply, 'validation_error', 'The path is not valid percent-encoded UTF-8', 'path');
  }
  if (error.code === 'FST_ERR_MAX_PARAM_LENGTH') {
    return send(reply, 'validation_error', 'A path parameter is too long', 'path');
  }
  return handleError(error, request, reply);
}
