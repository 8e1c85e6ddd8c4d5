/**
 * An agent's writes after its creation: a change stored as the next version (optimistic, or under If-Match), its
 * budget, and its delete.
 */

import { AppError, notFound } from '../../errors/app-error.ts';
import type { Clock } from '../../lib/clock.ts';
import { jsonEqual } from '../../lib/hash.ts';
import type { Executor } from '../../storage/db.ts';
import { isForeignKeyViolation } from '../../storage/errors.ts';
import { type AuditContext, appendAudit, changedFields, SYSTEM_AUDIT } from '../audit/audit-log.ts';
import { type Budget, budgetColumns, resetSpend } from '../billing/budgets.ts';
import type { McpServerService, PreparedEntries } from '../mcp-servers/mcp-server-service.ts';
import { agentFromRow, configColumns, configOf, findAgentRow, insertAgentVersion } from './agent-repo.ts';
import type { AgentConfig } from './agent-types.ts';
import { checkAgentConfig, type ValidationContext } from './agent-validation.ts';

/** What the writes need of the service's dependencies. */
export interface AgentWriteDeps {
  db: Executor;
  clock: Clock;
  validation: ValidationContext;
  connectors: Pick<McpServerService, 'commitEntries' | 'linkAgent'>;
}

/** Who makes a change, and the version it expects to change (If-Match). */
export interface WriteOptions {
  /** The API key's prefix, or `cli`. */
  actor?: string | null;
  expectedVersion?: number;
  /** Who makes the change, for the audit log; without it the change is recorded as the system's. */
  audit?: AuditContext;
  /** The audit log's action: `agent.updated` unless said (`agent.restored`, `agent.applied`). */
  auditAction?: string;
}

function versionConflict(id: string, expected: number, current: number): AppError {
  return new AppError(
    'version_conflict',
    `agent ${id} is at version ${current}, not ${expected}: read it again and retry`,
    { details: { currentVersion: current, expectedVersion: expected } },
  );
}

/** Rolls back an update whose optimistic version check lost, so the loop can read and try again. */
class UpdateRaced extends Error {}
const UPDATE_ATTEMPTS = 5;

/** The agent's writes: `write` (a new version), `setBudget` and `remove`. */
export function createAgentWrites(deps: AgentWriteDeps) {
  const { clock, validation } = deps;

  /**
   * Stores the config `change` makes of the current one as the next version. Optimistic: the write is conditional
   * on the version read and retried when another writer got there first, unless the caller named the version it
   * expects (If-Match): then a version other than that one, read or raced, is a 409 version_conflict.
   */
  async function write(
    orgId: string,
    id: string,
    options: WriteOptions,
    entries: PreparedEntries | null,
    change: (current: AgentConfig) => AgentConfig,
  ): Promise<void> {
    for (let attempt = 0; attempt < UPDATE_ATTEMPTS; attempt++) {
      const row = await findAgentRow(deps.db, orgId, id);
      if (row === undefined) throw notFound('agent', id);
      if (options.expectedVersion !== undefined && options.expectedVersion !== row.version) {
        throw versionConflict(id, options.expectedVersion, row.version);
      }
      const current = configOf(agentFromRow(row));
      const next = change(current);
      checkAgentConfig(next, validation);
      if (row.workspace_provisioned_at !== null) {
        for (const field of ['skills', 'networkPolicy'] as const) {
          if (!jsonEqual(current[field], next[field])) {
            throw new AppError(
              'sandbox_provisioned',
              `${field} cannot change after the agent's workspace has been provisioned`,
              { param: field },
            );
          }
        }
      }
      const now = Math.max(clock.now(), row.updated_at);
      const version = row.version + 1;
      const updated = await deps.db
        .transaction()
        .execute(async (trx) => {
          let stored = next;
          if (entries !== null) {
            const committed = await deps.connectors.commitEntries(trx, orgId, entries);
            stored = { ...next, mcpServers: committed.entries };
            await deps.connectors.linkAgent(trx, id, committed.serverIds);
          }
          // Conditional on the version read: of two writers that read the same version, exactly one matches.
          const result = await trx
            .updateTable('agents')
            .set({ ...configColumns(stored), version, updated_at: now })
            .where('id', '=', id)
            .where('org_id', '=', orgId)
            .where('version', '=', row.version)
            .executeTakeFirst();
          if (result.numUpdatedRows === 0n) {
            // Another writer got there first: undo this attempt's links and connectors with the transaction.
            throw new UpdateRaced();
          }
          await insertAgentVersion(trx, {
            agentId: id,
            version,
            config: stored,
            at: now,
            actor: options.actor ?? null,
          });
          await appendAudit(
            trx,
            options.audit ?? SYSTEM_AUDIT,
            {
              orgId,
              action: options.auditAction ?? 'agent.updated',
              targetType: 'agent',
              targetId: id,
              before: { version: row.version },
              after: { version, changed_fields: changedFields({ ...current }, { ...stored }) },
            },
            clock,
          );
          return true;
        })
        .catch((error: unknown) => {
          if (error instanceof UpdateRaced) return false;
          throw error;
        });
      if (updated) return;
    }
    throw new AppError('service_unavailable', 'the agent is being changed concurrently; retry', { retriable: true });
  }

  /**
   * Sets or removes the agent's budget, without a new version (Agent.budget), honouring If-Match; the running total
   * of the budget's period is recomputed from the agent's stored cost.
   */
  async function setBudget(orgId: string, id: string, budget: Budget | null, expected?: number): Promise<void> {
    await deps.db.transaction().execute(async (trx) => {
      const row = await findAgentRow(trx, orgId, id);
      if (row === undefined) throw notFound('agent', id);
      if (expected !== undefined && expected !== row.version) throw versionConflict(id, expected, row.version);
      const now = Math.max(clock.now(), row.updated_at);
      await trx
        .updateTable('agents')
        .set({ ...budgetColumns(budget), updated_at: now })
        .where('id', '=', id)
        .where('org_id', '=', orgId)
        .execute();
      if (budget !== null) await resetSpend(trx, { ...budget, scope: 'agent', id, orgId, now });
    });
  }

  /** Deletes the agent, unless it is the default one or a session references it (409). */
  async function remove(orgId: string, id: string, audit: AuditContext = SYSTEM_AUDIT): Promise<void> {
    await deps.db.transaction().execute(async (trx) => {
      const row = await findAgentRow(trx, orgId, id);
      if (row === undefined) throw notFound('agent', id);
      if (row.is_default === 1)
        throw new AppError('default_agent', "the organization's default agent cannot be deleted");
      const session = await trx
        .selectFrom('sessions')
        .select('id')
        .where('agent_id', '=', id)
        .limit(1)
        .executeTakeFirst();
      if (session !== undefined)
        throw new AppError('agent_in_use', 'the agent cannot be deleted while sessions reference it');
      try {
        await trx.deleteFrom('agents').where('id', '=', id).where('org_id', '=', orgId).execute();
      } catch (error) {
        // A session created between the check and the delete: the foreign key refuses, and so do we.
        if (isForeignKeyViolation(error)) {
          throw new AppError('agent_in_use', 'the agent cannot be deleted while sessions reference it', {
            cause: error,
          });
        }
        throw error;
      }
      await appendAudit(
        trx,
        audit,
        {
          orgId,
          action: 'agent.deleted',
          targetType: 'agent',
          targetId: id,
          before: { name: row.name, version: row.version },
        },
        clock,
      );
    });
  }

  return { write, setBudget, remove };
}
