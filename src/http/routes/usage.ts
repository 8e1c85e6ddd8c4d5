import { Readable } from 'node:stream';
import type { Deps } from '../../deps.ts';
import { parseGroupBy, type UsageFilter } from '../../domain/usage/usage-service.ts';
import { validationError } from '../../errors/app-error.ts';
import { orgOf } from '../auth.ts';
import { errorResponses } from '../schemas/common.ts';
import { UsageList, UsageQuery } from '../schemas/usage.ts';
import type { App } from '../types.ts';

const tags = ['Usage'];

/** Unix seconds → epoch ms, kept within the safe integers (a far-future bound is as good as none). */
const millis = (seconds: number): number => Math.min(seconds * 1000, Number.MAX_SAFE_INTEGER);

const CsvText = { type: 'string', description: 'RFC 4180 CSV, header first (docs/usage.md#csv)' };

export function usageRoutes(app: App, deps: Deps): void {
  app.route({
    method: 'GET',
    url: '/v1/usage',
    // Usage is read from the runs, which sessions:read already shows one by one (GET /v1/runs).
    config: { scopes: ['sessions:read'] },
    schema: {
      summary: 'Get usage',
      description:
        'Turns, input, cached input and output tokens and cost of the organization, summed per group of day (UTC), agent, API key, model, source and end user, over runs accepted in [start_time, end_time). Cursor-paginated (after = last_id). format=csv or Accept: text/csv answers the whole report as CSV instead.',
      tags,
      querystring: UsageQuery,
      response: {
        200: { content: { 'application/json': { schema: UsageList }, 'text/csv': { schema: CsvText } } },
        ...errorResponses(400, 401, 403),
      },
    },
    handler: async (request, reply) => {
      const q = request.query;
      const groupBy = parseGroupBy(q.group_by);
      if (q.start_time !== undefined && q.end_time !== undefined && q.end_time < q.start_time) {
        throw validationError('end_time', 'end_time must not be before start_time');
      }
      const filter: UsageFilter = {
        ...(q.start_time === undefined ? {} : { startMs: millis(q.start_time) }),
        ...(q.end_time === undefined ? {} : { endMs: millis(q.end_time) }),
        ...(q.agent_id === undefined ? {} : { agentId: q.agent_id.toLowerCase() }),
        ...(q.api_key_id === undefined ? {} : { apiKeyId: q.api_key_id.toLowerCase() }),
        ...(q.model === undefined ? {} : { model: q.model }),
        ...(q.source === undefined ? {} : { source: q.source }),
        ...(q.end_user === undefined ? {} : { endUser: q.end_user }),
      };
      const accept = request.headers.accept ?? '';
      const format = q.format ?? (/\btext\/csv\b/i.test(accept) ? 'csv' : 'json');
      const query = { groupBy, filter };
      const paging = q.after === undefined ? {} : { after: q.after };
      if (format === 'json') return deps.usage.report(orgOf(request), query, { limit: q.limit ?? 100, ...paging });
      const records = deps.usage.csv(orgOf(request), query, paging);
      return reply
        .header('content-type', 'text/csv; charset=utf-8')
        .header('content-disposition', 'attachment; filename="usage.csv"')
        .header('cache-control', 'no-store')
        .send(Readable.from(records));
    },
  });
}
