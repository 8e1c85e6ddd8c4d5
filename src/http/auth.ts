/**
 * Authentication, scope checks and rate limits, run on every request before its body is read. The route's
 * `config.scopes` says what it needs; routes marked `public` need nothing; routes marked `admin` (the operator's
 * /v1/admin routes) need the AGENTRY_ADMIN_TOKEN, not a key, and do not exist without it.
 */
import { createHash, timingSafeEqual } from 'node:crypto';
import type { FastifyReply, FastifyRequest } from 'fastify';
import type { AuditContext } from '../domain/audit/audit-log.ts';
import { describeScope, type Scope } from '../domain/auth/scopes.ts';
import { policyHeader, type RateLimiter, stateHeader } from '../domain/limits/rate-limiter.ts';
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

const digest = (value: string): Buffer => createHash('sha256').update(value).digest();

/** The operator's routes: 404 without AGENTRY_ADMIN_TOKEN, 401 without that token (compared in constant time). */
function checkAdmin(request: FastifyRequest, expected: Buffer | null): void {
  if (expected === null) {
    const path = request.url.split('?')[0] ?? request.url;
    throw new AppError('route_not_found', `No route ${request.method} ${path}`);
  }
  const sent = /^Bearer\s+(\S+)\s*$/i.exec(request.headers.authorization ?? '')?.[1] ?? '';
  if (!timingSafeEqual(digest(sent), expected)) {
    throw new AppError('invalid_admin_token', 'This route needs Authorization: Bearer <AGENTRY_ADMIN_TOKEN>');
  }
}

export function createAuthHook(deps: {
  auth: Authenticator;
  clock: Clock;
  rateLimiter: RateLimiter;
  adminToken: string | null;
}) {
  const adminDigest = deps.adminToken === null ? null : digest(deps.adminToken);
  return async function authenticate(request: FastifyRequest, reply: FastifyReply): Promise<void> {
    request.principal = null;
    const config = request.routeOptions.config;
    if (config.admin === true) return checkAdmin(request, adminDigest);
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
    const rate = await deps.rateLimiter.check(principal, deps.clock.now());
    if (rate.policies.length === 0) return;
    reply.header('ratelimit-policy', policyHeader(rate)).header('ratelimit', stateHeader(rate));
    if (rate.exceeded !== null) {
      const { name, quota, resetS } = rate.exceeded;
      reply.header('retry-after', String(resetS));
      throw new AppError(
        'rate_limit_exceeded',
        `Rate limit of the ${name === 'api_key' ? 'API key' : 'organization'} exceeded: ${quota} requests per minute; retry in ${resetS} s`,
      );
    }
  };
}

/**
 * A preHandler hook (after the body is parsed, so the handler and everything it awaits see it): the request's API
 * key, for what records the key that submitted it (runs.api_key_id, and sessions.turn_key_id for the key's limit of
 * concurrent turns).
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

/** Whether the request's key has `scope` (beyond the route's own scopes). */
export function hasScope(request: FastifyRequest, scope: Scope): boolean {
  return request.principal?.scopes.has(scope) === true;
}

/** Refuses (403 insufficient_scopes) a request whose key lacks `scope`, needed for part of what it asks. */
export function requireScope(request: FastifyRequest, scope: Scope, what: string): void {
  if (!hasScope(request, scope)) {
    throw new AppError(
      'insufficient_scopes',
      `This API key lacks the scope ${describeScope(scope)}, needed for ${what}`,
    );
  }
}

/** Who a write is made by, as agent versions record it: the key's displayed prefix. */
export function actorOf(request: FastifyRequest): string {
  if (request.principal === null) throw new AppError('missing_api_key', 'No API key');
  return request.principal.keyPrefix;
}

/** Who makes a write and the request it comes with, as the audit log records them (domain/audit/audit-log.ts). */
export function auditOf(request: FastifyRequest): AuditContext {
  if (request.principal === null) throw new AppError('missing_api_key', 'No API key');
  const { keyId, keyPrefix } = request.principal;
  return { actor: { type: 'api_key', keyId, keyPrefix }, requestId: request.id };
}
