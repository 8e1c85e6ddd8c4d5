/** Schedules and their runs (docs/schedules.md): agents that run on a clock. */
import type { Deps } from '../../deps.ts';
import { auditOf, orgOf } from '../auth.ts';
import { errorResponses, IdempotencyHeaders } from '../schemas/common.ts';
import {
  EmptyRunBody,
  Schedule,
  ScheduleCreateBody,
  ScheduleDeleted,
  ScheduleList,
  ScheduleListQuery,
  ScheduleParams,
  SchedulePreview,
  SchedulePreviewQuery,
  ScheduleRun,
  ScheduleRunList,
  ScheduleRunParams,
  ScheduleRunsParams,
  ScheduleUpdateBody,
} from '../schemas/schedules.ts';
import type { App } from '../types.ts';

const tags = ['Schedules'];

const page = (query: { limit: number; cursor?: string | undefined }) =>
  query.cursor === undefined ? { limit: query.limit } : { limit: query.limit, cursor: query.cursor };

export function scheduleRoutes(app: App, deps: Deps): void {
  const { schedules } = deps;

  app.route({
    method: 'POST',
    url: '/v1/schedules',
    config: { scopes: ['agents:write'] },
    schema: {
      summary: 'Create a schedule',
      description:
        'Runs an agent on a clock: exactly one of cron (5 fields, in timezone, DST-aware) or interval_seconds. Each tick submits input as a turn (source schedule) in a new session, or in session_id. An invalid cron, time zone, agent or session is a 400 naming the field. An Idempotency-Key makes retries return the same schedule.',
      tags,
      headers: IdempotencyHeaders,
      body: ScheduleCreateBody,
      response: { 201: Schedule, ...errorResponses(400, 401, 403, 409, 413) },
    },
    handler: async (request, reply) => {
      const result = await schedules.create(
        orgOf(request),
        request.body,
        request.headers['idempotency-key'],
        auditOf(request),
      );
      if (result.replayed) reply.header('idempotent-replayed', 'true');
      return reply.code(201).send(result.body);
    },
  });

  app.route({
    method: 'GET',
    url: '/v1/schedules',
    config: { scopes: ['agents:read'] },
    schema: {
      summary: 'List schedules',
      description: 'Newest first. Cursor-paginated: pass next_cursor as cursor while has_more is true.',
      tags,
      querystring: ScheduleListQuery,
      response: { 200: ScheduleList, ...errorResponses(400, 401, 403) },
    },
    handler: async (request) => schedules.list(orgOf(request), page(request.query)),
  });

  app.route({
    method: 'GET',
    url: '/v1/schedules/preview',
    config: { scopes: ['agents:read'] },
    schema: {
      summary: 'Preview fire times',
      description:
        'The next five fire times of a cron expression in a time zone, or of an interval counted from now, validated as a new schedule is (400 naming cron, interval_seconds or timezone). Saves nothing.',
      tags,
      querystring: SchedulePreviewQuery,
      response: { 200: SchedulePreview, ...errorResponses(400, 401, 403) },
    },
    handler: async (request) => schedules.preview(request.query),
  });

  app.route({
    method: 'GET',
    url: '/v1/schedules/:id',
    config: { scopes: ['agents:read'] },
    schema: {
      summary: 'Get a schedule',
      description: 'With next_run_at and the next few fire times.',
      tags,
      params: ScheduleParams,
      response: { 200: Schedule, ...errorResponses(400, 401, 403, 404) },
    },
    handler: async (request) => schedules.get(orgOf(request), request.params.id),
  });

  app.route({
    method: 'POST',
    url: '/v1/schedules/:id',
    config: { scopes: ['agents:write'] },
    schema: {
      summary: 'Update a schedule',
      description:
        'Changes the given fields. enabled:false pauses it (next_run_at null), enabled:true resumes it from now; a new cron, interval or time zone recomputes next_run_at.',
      tags,
      params: ScheduleParams,
      body: ScheduleUpdateBody,
      response: { 200: Schedule, ...errorResponses(400, 401, 403, 404, 413) },
    },
    handler: async (request) => schedules.update(orgOf(request), request.params.id, request.body, auditOf(request)),
  });

  app.route({
    method: 'DELETE',
    url: '/v1/schedules/:id',
    config: { scopes: ['agents:write'] },
    schema: {
      summary: 'Delete a schedule',
      description: 'Deletes the schedule and its run history; turns already submitted finish in their sessions.',
      tags,
      params: ScheduleParams,
      response: { 200: ScheduleDeleted, ...errorResponses(400, 401, 403, 404) },
    },
    handler: async (request) => schedules.delete(orgOf(request), request.params.id, auditOf(request)),
  });

  app.route({
    method: 'POST',
    url: '/v1/schedules/:id/run',
    config: { scopes: ['agents:write'] },
    schema: {
      summary: 'Run a schedule now',
      description:
        'A manual run (trigger manual), whether the schedule is enabled or paused. It starts at once, or after the run of this schedule still running. An Idempotency-Key makes retries return the same run.',
      tags,
      params: ScheduleParams,
      headers: IdempotencyHeaders,
      body: EmptyRunBody,
      response: { 202: ScheduleRun, ...errorResponses(400, 401, 403, 404, 409) },
    },
    handler: async (request, reply) => {
      const result = await schedules.runNow(orgOf(request), request.params.id, request.headers['idempotency-key']);
      if (result.replayed) reply.header('idempotent-replayed', 'true');
      return reply.code(202).send(result.body);
    },
  });

  app.route({
    method: 'GET',
    url: '/v1/schedules/:schedule_id/runs',
    config: { scopes: ['agents:read'] },
    schema: {
      summary: 'List the runs of a schedule',
      description: 'Newest first. Cursor-paginated: pass next_cursor as cursor while has_more is true.',
      tags,
      params: ScheduleRunsParams,
      querystring: ScheduleListQuery,
      response: { 200: ScheduleRunList, ...errorResponses(400, 401, 403, 404) },
    },
    handler: async (request) => schedules.listRuns(orgOf(request), request.params.schedule_id, page(request.query)),
  });

  app.route({
    method: 'GET',
    url: '/v1/schedules/:schedule_id/runs/:id',
    config: { scopes: ['agents:read'] },
    schema: {
      summary: 'Get a schedule run',
      description:
        'The Schedule Run named by schedule.run.* notifications: status, session, turn and engine run ids, result preview, usage, and the pending required_actions of its turn.',
      tags,
      params: ScheduleRunParams,
      response: { 200: ScheduleRun, ...errorResponses(400, 401, 403, 404) },
    },
    handler: async (request) => schedules.getRun(orgOf(request), request.params.schedule_id, request.params.id),
  });
}
