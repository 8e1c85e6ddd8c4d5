/**
 * The one typed dependency object built at startup and handed to the HTTP layer, the CLI and (later) the
 * engine. No module keeps singletons; tests build their own.
 */
import type { Logger } from 'pino';
import { type Bus, createLocalBus } from './bus/bus.ts';
import type { Config } from './config.ts';
import { type AgentService, createAgentService } from './domain/agents/agent-service.ts';
import { createIdempotency, type Idempotency } from './domain/idempotency.ts';
import { createMessageService, type MessageService } from './domain/messages/message-service.ts';
import { type Authenticator, createAuthenticator } from './domain/orgs/api-keys.ts';
import { createOrgService, type OrgService } from './domain/orgs/org-service.ts';
import { createSessionService, type SessionService } from './domain/sessions/session-service.ts';
import { createEngine, type Engine } from './engine/engine.ts';
import { type Clock, systemClock } from './lib/clock.ts';
import { createModelRegistry, type ModelRegistry } from './models/registry.ts';
import { openStorage, type Storage } from './storage/db.ts';

export interface Deps {
  config: Config;
  logger: Logger;
  clock: Clock;
  storage: Storage;
  auth: Authenticator;
  models: ModelRegistry;
  agents: AgentService;
  sessions: SessionService;
  orgs: OrgService;
  idempotency: Idempotency;
  bus: Bus;
  messages: MessageService;
}

export class StartupError extends Error {
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = new.target.name;
  }
}

/** Opens storage, applies migrations and wires the services. */
export async function buildDeps(config: Config, logger: Logger, clock: Clock = systemClock): Promise<Deps> {
  const models = createModelRegistry(config);
  const modelProblem = models.problem(config.defaultModel);
  if (modelProblem !== null) throw new StartupError(`AGENTRY_DEFAULT_MODEL: ${modelProblem}`);
  const storage = await openStorage(config);
  try {
    const applied = await storage.migrate();
    if (applied.length > 0) logger.info({ migrations: applied }, 'database migrated');
  } catch (error) {
    await storage.close();
    throw error;
  }
  const db = storage.db;
  const bus = createLocalBus();
  const idempotency = createIdempotency({ db, clock, ttlMs: config.idempotencyTtlMs });
  const agents = createAgentService({
    db,
    clock,
    defaultModel: config.defaultModel,
    validation: { models, allowInsecureDestinations: config.allowInsecureDestinations },
  });
  return {
    config,
    logger,
    clock,
    storage,
    auth: createAuthenticator({ db, externalChanges: storage.externalChanges }),
    models,
    agents,
    sessions: createSessionService({ db, clock }),
    orgs: createOrgService({ db, clock, agents }),
    idempotency,
    bus,
    messages: createMessageService({ db, clock, bus, idempotency }),
  };
}

/** The turn engine of this process, over the same storage and bus as the API. */
export function buildEngine(deps: Deps): Engine {
  return createEngine(
    {
      db: deps.storage.db,
      dialect: deps.storage.dialect,
      leaseMs: deps.config.leaseMs,
      clock: deps.clock,
      bus: deps.bus,
      models: deps.models,
      logger: deps.logger,
      serverTools: new Map(),
    },
    { concurrency: deps.config.workerConcurrency, pollMs: deps.config.pollMs },
  );
}
