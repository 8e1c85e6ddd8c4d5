/**
 * Authentication and scope checks, run on every request before its body is read. The route's
 * `config.scopes` says what it needs; routes marked `public` need nothing.
 */
import type { FastifyReply, FastifyRequest } from 'fastify';
import { describeScope } from '../domain/auth/scopes.ts';
import type { Authenticator } from '../domain/orgs/api-keys.ts';
import { AppError } from '../errors/app-error.ts';
import type { Clock } from '../lib/clock.ts';
import { runWithApiKey } from '../lib/request-key.ts';

function presentedKey(request: FastifyRequest): string | null {
  const authorization = request.headers.authorization;
  if (typeof authorization === 'string' && authorization !== '') {
    const match = /^Bearer\s+(\S+)\s*$/i.exec(authorization);
    return match?.[1] ?? authorization.trim();
  }
  for (const name of ['api_key', 'x-api-key'] as const) {
    const value = request.headers[name];
    if (typeof value === 'string' && value.trim() !== '') return value.trim();
  }
  return null;
}

export function createAuthHook(deps: { auth: Authenticator; clock: Clock }) {
  return async function authenticate(request: FastifyRequest, _reply: FastifyReply): Promise<void> {
    request.principal = null;
    const config = request.routeOptions.config;
    // Unknown routes fall through to the not-found handler; public routes need no key.
    if (config.public === true || config.scopes === undefined) return;
    const key = presentedKey(request);
    if (key === null) {
      throw new AppError('missing_api_key', 'No API key: send Authorization: Bearer <key> or an API_KEY header');
    }
    const principal = await deps.auth.authenticate(key, deps.clock.now());
    if (principal === null) throw new AppError('invalid_api_key', 'The API key is invalid, expired or revoked');
    const missing = config.scopes.filter((scope) => !principal.scopes.has(scope));
    if (missing.length > 0) {
      throw new AppError(
        'insufficient_scopes',
        `This API key lacks the scope${missing.length > 1 ? 's' : ''} ${missing.map(describeScope).join(', ')}`,
      );
    }
    request.principal = principal;
  };
}

/**
 * A preHandler hook (after the body is parsed, so the handler and everything it awaits see it): the request's API
 * key, for what records the key that submitted it (runs.api_key_id).
 */
export function bindRequestKey(request: FastifyRequest, _reply: FastifyReply, done: () => void): void {
  if (request.principal === null) {
    done();
    return;
  }
  runWithApiKey(request.principal.keyId, done);
}

/** The authenticated organization of a request on a route that requires a key. */
export function orgOf(request: FastifyRequest): string {
  if (request.principal === null) throw new AppError('missing_api_key', 'No API key');
  return request.principal.orgId;
}

/** Who a write is made by, as agent versions record it: the key's displayed prefix. */
export function actorOf(request: FastifyRequest): string {
  if (request.principal === null) throw new AppError('missing_api_key', 'No API key');
  return request.principal.keyPrefix;
}
