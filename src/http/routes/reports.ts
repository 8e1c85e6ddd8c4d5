import type { Deps } from '../../deps.ts';
import { orgOf } from '../auth.ts';
import { errorResponses, IdParams } from '../schemas/common.ts';
import { ReportContent, ReportList, ReportParams } from '../schemas/reports.ts';
import type { App } from '../types.ts';
import { contentDisposition } from './files.ts';

const tags = ['Agents'];

/**
 * Reports are written by agents and may hold anything, HTML with script included: they are served as downloads
 * under a policy that lets nothing run, so a report can never act in this API's origin with the reader's key.
 */
const REPORT_HEADERS = {
  'x-content-type-options': 'nosniff',
  'content-security-policy': "default-src 'none'; style-src 'unsafe-inline'; img-src data: https:; sandbox",
  'cache-control': 'private, no-store',
};

export function reportRoutes(app: App, deps: Deps): void {
  app.route({
    method: 'GET',
    url: '/v1/agents/:id/reports',
    config: { scopes: ['agents:read'] },
    schema: {
      summary: 'List the reports of an agent',
      description: 'The Markdown and HTML files in reports/ of the agent workspace (written by build_report), by name.',
      tags,
      params: IdParams,
      response: { 200: ReportList, ...errorResponses(400, 401, 403, 404) },
    },
    handler: async (request) => deps.reports.list(orgOf(request), request.params.id.toLowerCase()),
  });

  app.route({
    method: 'GET',
    url: '/v1/agents/:id/reports/:name',
    config: { scopes: ['agents:read'] },
    schema: {
      summary: 'Download a report of an agent',
      tags,
      params: ReportParams,
      response: { 200: ReportContent, ...errorResponses(400, 401, 403, 404) },
    },
    handler: async (request, reply) => {
      const { report, content } = await deps.reports.content(
        orgOf(request),
        request.params.id.toLowerCase(),
        request.params.name,
      );
      return reply
        .headers(REPORT_HEADERS)
        .header('content-type', `${report.format === 'html' ? 'text/html' : 'text/markdown'}; charset=utf-8`)
        .header('content-disposition', contentDisposition(report.name))
        .send(content);
    },
  });
}
