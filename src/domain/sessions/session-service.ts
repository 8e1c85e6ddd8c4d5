/** Sessions: durable conversations created from an Agent. Execution starts with the first Message. */

import type { Bus } from '../../bus/bus.ts';
import { notFound, validationError } from '../../errors/app-error.ts';
import { type Clock, iso } from '../../lib/clock.ts';
import { newId } from '../../lib/ids.ts';
import { SESSION_STATUSES, type SessionStatus } from '../../storage/column-values.ts';
import type { Executor } from '../../storage/db.ts';
import { prepare } from '../../storage/prepared.ts';
import type { SessionRow } from '../../storage/schema.ts';
import { requireAgentVersion } from '../agents/agent-repo.ts';
import { type AuditContext, appendAudit, SYSTEM_AUDIT } from '../audit/audit-log.ts';
import {
  type Budget,
  type BudgetInput,
  type BudgetView,
  budgetOf,
  budgetView,
  parseBudget,
  resetSpend,
} from '../billing/budgets.ts';
import { writeEvents } from '../outbox.ts';
import { createSession, setSessionBudget, setSessionTitle } from '../turns/session-rows.ts';
import type { WebhookSubscriptions } from '../webhooks/subscriptions.ts';
import { markCreated } from './new-sessions.ts';

export { SESSION_STATUSES, type SessionStatus };

export interface Session {
  id: string;
  object: 'session';
  /** Null for a Conversation created without an agent, until its first Response fixes one. */
  agentId: string | null;
  /** The agent version every turn runs; null follows the latest. */
  agentVersion: number | null;
  title: string | null;
  status: SessionStatus;
  /** The end user the session serves (per-user memories and credentials are theirs), null when none was named. */
  endUser: string | null;
  /** The session's lifetime spend cap (docs/budgets.md); null: none. */
  budget: BudgetView | null;
  conversationId: string;
  createdAt: string;
  updatedAt: string;
}

export interface SessionPage {
  data: Session[];
  total: number;
  limit: number;
  offset: number;
}

export const conversationIdOf = (sessionId: string): string => `conv_${sessionId}`;

const agentOfOrg = prepare((db, p: { orgId: string; id: string }) =>
  db.selectFrom('agents').select('id').where('org_id', '=', p.orgId).where('id', '=', p.id),
);

export function sessionFromRow(
  row: Pick<SessionRow, 'id' | 'agent_id' | 'title' | 'status' | 'created_at' | 'updated_at'> &
    Partial<Pick<SessionRow, 'end_user' | 'agent_version' | 'budget_limit_micros'>>,
): Session {
  return {
    id: row.id,
    object: 'session',
    agentId: row.agent_id,
    agentVersion: row.agent_version ?? null,
    title: row.title,
    status: row.status,
    endUser: row.end_user ?? null,
    budget: budgetView(budgetOf(row.budget_limit_micros, 'lifetime')),
    conversationId: conversationIdOf(row.id),
    createdAt: iso(row.created_at),
    updatedAt: iso(row.updated_at),
  };
}

/** A session's budget from a request (a 400 naming `budget.limitUsd` or `budget.period`): lifetime only. */
function sessionBudget(input: BudgetInput | null | undefined): Budget | null | undefined {
  return parseBudget(input == null ? input : { limit: input.limitUsd, period: input.period }, {
    field: 'budget',
    limit: 'limitUsd',
    periods: ['lifetime'],
    defaultPeriod: 'lifetime',
  });
}

export interface SessionServiceDeps {
  db: Executor;
  clock: Clock;
  subscriptions: WebhookSubscriptions;
  /** Announces a created session's webhook event to the background senders (the `outbox` topic). */
  bus: Pick<Bus, 'publish'>;
}

export function createSessionService(deps: SessionServiceDeps) {
  return {
    async list(orgId: string, query: { agentId?: string; limit: number; offset: number }): Promise<SessionPage> {
      // Workspaces of legacy Tasks are sessions too, but not the Sessions API's.
      let base = deps.db.selectFrom('sessions').where('org_id', '=', orgId).where('hidden', '=', 0);
      if (query.agentId !== undefined) base = base.where('agent_id', '=', query.agentId.toLowerCase());
      const [rows, count] = await Promise.all([
        base
          .selectAll()
          .orderBy('created_at', 'desc')
          .orderBy('id', 'desc')
          .limit(query.limit)
          .offset(query.offset)
          .execute(),
        base.select((eb) => eb.fn.countAll<number>().as('total')).executeTakeFirstOrThrow(),
      ]);
      return { data: rows.map(sessionFromRow), total: Number(count.total), limit: query.limit, offset: query.offset };
    },

    /**
     * Creates an idle Session of an Agent of the same organization (404 when there is none), or without an agent
     * (`agentId: null`, a Conversation whose first Response fixes it). `id` lets a caller name it in advance (to
     * listen for its events before it exists).
     */
    async create(
      orgId: string,
      input: {
        agentId: string | null;
        agentVersion?: number;
        title?: string;
        id?: string;
        metadata?: Record<string, string>;
        endUser?: string | null;
        budget?: BudgetInput | null;
      },
      db: Executor = deps.db,
    ): Promise<Session> {
      const agentId = input.agentId === null ? null : input.agentId.toLowerCase();
      if (agentId !== null) {
        const agent = await agentOfOrg.first(db, { orgId, id: agentId });
        if (agent === undefined) throw notFound('agent', agentId);
      }
      if (input.agentVersion !== undefined) {
        if (agentId === null) throw validationError('agentVersion', 'a version can be pinned only with an agent');
        await requireAgentVersion(db, agentId, input.agentVersion, 'agentVersion');
      }
      const budget = sessionBudget(input.budget);
      const now = deps.clock.now();
      const row = {
        id: input.id ?? newId(),
        org_id: orgId,
        agent_id: agentId,
        agent_version: input.agentVersion ?? null,
        title: input.title ?? null,
        end_user: input.endUser ?? null,
        budget_limit_micros: budget?.limitMicros ?? null,
        status: 'idle' as const,
        created_at: now,
        updated_at: now,
        metadata:
          input.metadata === undefined || Object.keys(input.metadata).length === 0
            ? null
            : JSON.stringify(input.metadata),
      };
      await createSession(db, row);
      markCreated(db, row.id);
      await writeEvents(db, { orgId, sessionId: row.id, now }, [], {
        subscriptions: deps.subscriptions,
        events: [{ type: 'agent.session.created', data: { id: row.id } }],
      });
      // Written in a caller's transaction, it is announced by the caller once that commits.
      if (!db.isTransaction) deps.bus.publish('outbox', { sessionId: row.id });
      return sessionFromRow(row);
    },

    /**
     * Changes the session's title (null removes it) and its budget (docs/budgets.md; its running total is recomputed
     * from its stored cost), each only when given.
     */
    async update(
      orgId: string,
      id: string,
      change: { budget?: BudgetInput | null; title?: string | null },
      audit: AuditContext = SYSTEM_AUDIT,
    ): Promise<Session> {
      const budget = sessionBudget(change.budget);
      const sessionId = id.toLowerCase();
      await deps.db.transaction().execute(async (trx) => {
        const now = deps.clock.now();
        if (change.title !== undefined) {
          const title = change.title === null ? null : change.title.trim();
          if (!(await setSessionTitle(trx, { sessionId, orgId, title, now }))) throw notFound('session', id);
        }
        if (budget === undefined) return;
        const limitMicros = budget?.limitMicros ?? null;
        if (!(await setSessionBudget(trx, { sessionId, orgId, limitMicros, now }))) throw notFound('session', id);
        if (budget != null) await resetSpend(trx, { ...budget, scope: 'session', id: sessionId, orgId, now });
        const after = { budget: limitMicros === null ? null : { limit_usd: limitMicros / 1_000_000 } };
        const entry = { orgId, action: 'session.budget_updated', targetType: 'session', targetId: sessionId, after };
        await appendAudit(trx, audit, { ...entry, before: null }, deps.clock);
      });
      return this.get(orgId, sessionId);
    },

    async get(orgId: string, id: string): Promise<Session> {
      const row = await deps.db
        .selectFrom('sessions')
        .selectAll()
        .where('org_id', '=', orgId)
        .where('id', '=', id.toLowerCase())
        .where('hidden', '=', 0)
        .executeTakeFirst();
      if (row === undefined) throw notFound('session', id);
      return sessionFromRow(row);
    },
  };
}

export type SessionService = ReturnType<typeof createSessionService>;
