/**
 * buildApp(deps): the Fastify instance with its plugins, hooks, routes and the ONE error handler. It never
 * listens; main.ts does, and tests use `inject` or listen on port 0.
 */
import { randomUUID } from 'node:crypto';
import swagger from '@fastify/swagger';
import Fastify, { type FastifyRequest, type RouteOptions } from 'fastify';
import type { StreamHub } from './bus/live-hub.ts';
import type { ServeRole } from './config.ts';
import type { Deps } from './deps.ts';
import { describeScope } from './domain/auth/scopes.ts';
import { AppError } from './errors/app-error.ts';
import { bindRequestKey, createAuthHook } from './http/auth.ts';
import { handleClientError } from './http/client-errors.ts';
import { handleError, handleFrameworkError, handleNotFound } from './http/error-handler.ts';
import { createJsonBodyParser } from './http/json-body.ts';
import { createLifecycle, type Lifecycle, startingError } from './http/lifecycle.ts';
import { registerObservabilityHooks } from './http/observability-hooks.ts';
import { markOptionalBodies } from './http/openapi-document.ts';
import { declareCommonErrors } from './http/route-errors.ts';
import { probeRoutes } from './http/routes/system.ts';
import { ErrorResponse } from './http/schemas/common.ts';
import { EVENT_SCHEMAS } from './http/schemas/events.ts';
import { registerStorageGate } from './http/storage-gate.ts';
import type { App } from './http/types.ts';
import { createValidatorCompiler, type RequestPart, requestPartSchema } from './http/validation.ts';
import { RequestLogController } from './logger.ts';

const REQUEST_ID = /^[A-Za-z0-9._:-]{1,128}$/;
/**
 * Longer than any request line Node accepts (16 KiB of headers), so the router never cuts a path parameter short
 * with its own 414: every parameter reaches its schema and gets a validation error that names it.
 */
const MAX_PARAM_LENGTH = 16 * 1024;
const REQUEST_PARTS: readonly RequestPart[] = ['body', 'querystring', 'params', 'headers'];
/**
 * How long a request that arrives while the server starts waits for it (main.ts bootstraps right after it listens:
 * milliseconds). A client that calls as soon as the port opens gets its answer, not a 401 for a key about to exist.
 */
const STARTUP_WAIT_MS = 10_000;

function requestId(request: { headers: Record<string, string | string[] | undefined> }): string {
  const given = request.headers['x-request-id'];
  return typeof given === 'string' && REQUEST_ID.test(given) ? given : randomUUID();
}

export interface BuiltApp {
  app: App;
  lifecycle: Lifecycle;
  /** Every registered route, for invariant tests and the OpenAPI document. */
  routes: RouteOptions[];
  hub: StreamHub;
}

export interface BuildAppOptions {
  /** `worker` serves only /healthz and /readyz (every other path is 404 route_not_found); default `all`. */
  role?: ServeRole;
  /**
   * True when startup work remains after listening (main.ts): the probes answer 503 and other requests wait (up to
   * `startupWaitMs`, then 503 with Retry-After) until `lifecycle.markReady()`. Default false: ready at once.
   */
  starting?: boolean;
  /** Default STARTUP_WAIT_MS. */
  startupWaitMs?: number;
}

export async function buildApp(deps: Deps, options: BuildAppOptions = {}): Promise<BuiltApp> {
  const app: App = Fastify({
    loggerInstance: deps.logger,
    genReqId: requestId,
    bodyLimit: deps.config.bodyLimitBytes,
    // Requests that arrive while the server closes get service_unavailable from the hook below, in the API's shape.
    return503OnClosing: false,
    clientErrorHandler: handleClientError,
    forceCloseConnections: 'idle',
    routerOptions: { ignoreTrailingSlash: true, maxParamLength: MAX_PARAM_LENGTH },
    frameworkErrors: handleFrameworkError,
    logController: new RequestLogController(deps.config.requestLogMinMs),
  }).withTypeProvider();
  const lifecycle: Lifecycle = createLifecycle({ ready: options.starting !== true });
  const startupWaitMs = options.startupWaitMs ?? STARTUP_WAIT_MS;
  const routes: RouteOptions[] = [];

  // JSON only: other media types get a clear unsupported_content_type instead of a confusing schema error.
  app.removeContentTypeParser('text/plain');
  const parseJson = createJsonBodyParser(app.getDefaultJsonParser('error', 'error'));
  app.removeContentTypeParser('application/json');
  app.addContentTypeParser('application/json', { parseAs: 'string' }, parseJson);
  app.setValidatorCompiler(createValidatorCompiler());
  // Response schemas document the API and are checked by tests; bodies are built from explicit view objects, so
  // plain JSON.stringify is safe, and it avoids the per-response branch validation that unions (anyOf) cost in
  // fast-json-stringify.
  app.setSerializerCompiler(() => (data) => JSON.stringify(data));
  app.setErrorHandler(handleError);
  app.setNotFoundHandler(handleNotFound);
  app.decorateRequest('principal', null);
  app.addSchema(ErrorResponse);
  for (const schema of EVENT_SCHEMAS) app.addSchema(schema);

  app.addHook('onRoute', (route) => {
    // The console's static pages are not part of the API: no OpenAPI entry, no API invariants.
    if (route.method === 'HEAD' || route.schema?.hide === true) return;
    routes.push(route);
    // Validation and the OpenAPI document both read these, so they cannot disagree.
    if (route.schema !== undefined) {
      for (const part of REQUEST_PARTS) {
        if (route.schema[part] !== undefined) route.schema[part] = requestPartSchema(route.schema[part], part);
      }
      declareCommonErrors(route);
    }
    const scopes = route.config?.scopes;
    if (route.config?.admin === true && route.schema !== undefined) {
      route.schema.security = [{ AdminToken: [] }];
      const note = 'Operator only: `Authorization: Bearer <AGENTRY_ADMIN_TOKEN>`; 404 when that is not configured.';
      route.schema.description =
        route.schema.description === undefined ? note : `${route.schema.description}\n\n${note}`;
    } else if (scopes !== undefined && route.schema !== undefined) {
      route.schema.security = [{ BearerAuth: [] }, { ApiKey: [] }];
      const note =
        scopes.length === 0
          ? 'Any valid API key.'
          : `Required scope${scopes.length > 1 ? 's' : ''}: ${scopes.map(describeScope).join(', ')}.`;
      route.schema.description =
        route.schema.description === undefined ? note : `${route.schema.description}\n\n${note}`;
    } else if (route.schema !== undefined) {
      route.schema.security = [];
    }
  });

  await app.register(swagger, {
    openapi: {
      openapi: '3.1.0',
      info: {
        title: 'Agentry Agent Platform API',
        version: '1.0.0',
        description: 'Self-hosted Agent Platform API: Agents, Sessions and Messages, Responses, Runs, webhooks.',
      },
      components: {
        securitySchemes: {
          BearerAuth: { type: 'http', scheme: 'bearer', description: 'Authorization: Bearer agk_…' },
          ApiKey: {
            type: 'apiKey',
            in: 'header',
            name: 'API_KEY',
            description: 'API_KEY: agk_… (X-API-Key also accepted)',
          },
          AdminToken: {
            type: 'http',
            scheme: 'bearer',
            description: "Authorization: Bearer <AGENTRY_ADMIN_TOKEN>: the operator's token for /v1/admin routes",
          },
        },
      },
    },
    refResolver: { buildLocalReference: (json, _baseUri, _fragment, index) => String(json.$id ?? `def-${index}`) },
    transformObject: (document) =>
      'openapiObject' in document ? markOptionalBodies(document.openapiObject) : document.swaggerObject,
  });

  app.addHook('onRequest', async (request: FastifyRequest, reply) => {
    reply.header('x-request-id', request.id);
    if (!lifecycle.accepting) {
      // A request on a connection kept alive while the server drains: the client should try another process.
      reply.header('connection', 'close');
      throw new AppError('service_unavailable', 'the server is shutting down');
    }
    // The probes say "starting" themselves; everything else waits for the server to be ready.
    if (!lifecycle.ready && request.routeOptions.config.probe !== true) {
      // Waiting for an unreachable database may take any time: no use holding the request for it.
      if (lifecycle.waitingFor !== null || !(await lifecycle.waitUntilReady(startupWaitMs))) {
        throw startingError(reply, lifecycle);
      }
    }
  });
  app.addHook('preClose', async () => {
    lifecycle.accepting = false;
  });
  registerObservabilityHooks(app, deps.tracing, deps.metrics);
  app.addHook(
    'onRequest',
    createAuthHook({
      auth: deps.auth,
      clock: deps.clock,
      rateLimiter: deps.rateLimiter,
      adminToken: deps.config.adminToken,
    }),
  );
  app.addHook('preHandler', bindRequestKey);
  registerStorageGate(app, deps.storage.space);

  if (options.role === 'worker') {
    probeRoutes(app, deps, lifecycle);
    await app.ready();
    // A worker serves no streams; the hub subscribes to live events only while someone listens.
    return { app, lifecycle, routes, hub: deps.live };
  }
  // Loaded here, not at the top: a worker never needs the API's routes (see http/api-routes.ts).
  const { registerApiRoutes } = await import('./http/api-routes.ts');
  const hub = deps.live;
  // Open streams never finish on their own; end them when the server closes.
  app.addHook('preClose', async () => hub.close());
  registerApiRoutes(app, deps, lifecycle, hub);

  await app.ready();
  return { app, lifecycle, routes, hub };
}
