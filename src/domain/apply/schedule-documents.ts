/**
 * Schedules as documents: the create body of POST /v1/schedules with the agent named by name instead of id, so
 * that documents move between organizations and servers. Like an agent document, a field left out takes the
 * create default, except `budget` (operated, left as it is when absent). A schedule's session is not part of
 * its document: an update keeps it, a create starts a new session per run.
 */
import type { Clock } from '../../lib/clock.ts';
import { jsonDiff } from '../../lib/json-diff.ts';
import type { AgentService } from '../agents/agent-service.ts';
import type { BudgetPeriod } from '../billing/budgets.ts';
import { checkTiming, type ScheduleInput, type ScheduleService } from '../schedules/schedule-service.ts';
import type { Schedule } from '../schedules/schedule-types.ts';
import { markerOf } from './apply-types.ts';
import type { Existing, PlanContext, ResourceKind } from './resource-kind.ts';

/** The create body of a schedule with its agent named by name; its session is not part of it. */
export type ScheduleDocument = Omit<ScheduleInput, 'agent_id' | 'session_id'> & { kind: 'schedule'; agent: string };

/** Every field of a schedule document at its value (defaults filled in), so that two can be compared. */
type Full = Required<Omit<ScheduleDocument, 'budget'>> & {
  budget?: { limit_usd: number; period: BudgetPeriod } | null;
};

function fullOf(schedule: Schedule, agent: string): Full {
  return {
    kind: 'schedule',
    name: schedule.name,
    agent,
    input: schedule.input,
    cron: schedule.cron,
    interval_seconds: schedule.interval_seconds,
    timezone: schedule.timezone,
    agent_version: schedule.agent_version,
    overlap: schedule.overlap,
    timeout_seconds: schedule.timeout_seconds,
    catch_up: schedule.catch_up,
    enabled: schedule.enabled,
    budget: schedule.budget,
  };
}

/** The document an export writes: fields at null left out (applied back, they take that value). */
function documentOf(full: Full): ScheduleDocument {
  const { cron, interval_seconds, agent_version, timeout_seconds, budget, ...rest } = full;
  return {
    ...rest,
    ...(cron === null ? {} : { cron }),
    ...(interval_seconds === null ? {} : { interval_seconds }),
    ...(agent_version === null ? {} : { agent_version }),
    ...(timeout_seconds === null ? {} : { timeout_seconds }),
    ...(budget === null || budget === undefined ? {} : { budget }),
  };
}

export function scheduleKind(deps: {
  schedules: ScheduleService;
  agents: AgentService;
  clock: Clock;
}): ResourceKind<ScheduleDocument> {
  const { schedules, agents, clock } = deps;

  return {
    kind: 'schedule',
    noun: 'schedule',

    async existing(orgId: string): Promise<Existing<ScheduleDocument>[]> {
      const names = new Map((await agents.list(orgId)).map((agent) => [agent.id, agent.name]));
      return (await schedules.all(orgId)).map((schedule) => {
        const document = documentOf(fullOf(schedule, names.get(schedule.agent_id) ?? schedule.agent_id));
        return { id: schedule.id, name: schedule.name, document, marker: markerOf(document) };
      });
    },

    async plan(context: PlanContext, document: ScheduleDocument, current) {
      context.requireAgent(document.agent, 'agent');
      const timing = checkTiming(
        document.cron ?? null,
        document.interval_seconds ?? null,
        document.timezone ?? 'UTC',
        clock.now(),
      );
      const budget =
        document.budget === undefined || document.budget === null
          ? document.budget
          : { limit_usd: document.budget.limit_usd, period: document.budget.period ?? 'month' };
      const desired: Full = {
        kind: 'schedule',
        name: document.name,
        agent: document.agent,
        input: document.input,
        cron: timing.cron,
        interval_seconds: timing.intervalSeconds,
        timezone: timing.timezone,
        agent_version: document.agent_version ?? null,
        overlap: document.overlap ?? 'skip',
        timeout_seconds: document.timeout_seconds ?? null,
        catch_up: document.catch_up ?? 'skip',
        enabled: document.enabled ?? true,
        ...(budget === undefined ? {} : { budget }),
      };
      let changes: string[] = [];
      if (current !== undefined) {
        const schedule = await schedules.get(context.orgId, current.id);
        const now = fullOf(schedule, current.document.agent);
        // A document without a budget leaves the schedule's alone (budgets are operated, as an agent's).
        if (budget === undefined) delete now.budget;
        changes = jsonDiff(now, desired).map((change) => change.path);
      }
      const input = (agentId: string): ScheduleInput => {
        const { kind: _kind, agent: _agent, budget: _budget, ...fields } = desired;
        return { ...fields, agent_id: agentId, ...(document.budget === undefined ? {} : { budget: document.budget }) };
      };
      return {
        changes,
        write: async ({ orgId, audit, agentId }) => {
          const id = agentId(document.agent, 'agent');
          if (current === undefined) {
            return { id: (await schedules.create(orgId, input(id), undefined, audit)).body.id };
          }
          if (changes.length > 0) await schedules.update(orgId, current.id, input(id), audit);
          return { id: current.id };
        },
      };
    },
  };
}
