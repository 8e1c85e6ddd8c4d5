import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import type {
  FastifyInstance,
  RawReplyDefaultExpression,
  RawRequestDefaultExpression,
  RawServerDefault,
} from 'fastify';
import type { Logger } from 'pino';
import type { Scope } from '../domain/auth/scopes.ts';
import type { Principal } from '../domain/orgs/api-keys.ts';

declare module 'fastify' {
  interface FastifyContextConfig {
    /** Scopes a key must hold; every authenticated route names at least one, unless it sets `anyKey`. */
    scopes?: readonly Scope[];
    /** True for the few authenticated routes that any valid key may call (with `scopes: []`). */
    anyKey?: boolean;
    /** True for the few routes that need no key (health, OpenAPI). */
    public?: boolean;
    /** True for the operator's /v1/admin routes: AGENTRY_ADMIN_TOKEN instead of a key (404 when it is unset). */
    admin?: boolean;
    /** True for /healthz and /readyz: they answer at once while the server starts (503), where others wait. */
    probe?: boolean;
    /** True for OpenAI-wire routes: an unknown top-level body field is answered as OpenAI does ("Unknown parameter"). */
    openaiParameters?: boolean;
  }
  interface FastifyRequest {
    principal: Principal | null;
  }
}

export type App = FastifyInstance<
  RawServerDefault,
  RawRequestDefaultExpression,
  RawReplyDefaultExpression,
  Logger,
  TypeBoxTypeProvider
>;
