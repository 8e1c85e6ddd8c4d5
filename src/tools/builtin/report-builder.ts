/**
 * The `report_builder` internal tool: `build_report {title, content, format?}` writes a Markdown or HTML report into
 * the agent's workspace under `reports/` (report-files.ts) and tells the model its path and where the user can
 * download it (`GET /v1/agents/{id}/reports/{name}`). Reports are written host-side through the workspace file
 * functions, so the tool works whether or not this host can run the sandbox.
 */
import { Type } from 'typebox';
import { WorkspacePathError } from '../sandbox/sandbox-errors.ts';
import type { SandboxRuntime } from '../sandbox/sandbox-runtime.ts';
import type { ToolProvider } from '../types.ts';
import { builtinTool, internalEntry, toolError } from './define-tool.ts';
import { REPORT_FORMATS, saveReport } from './report-files.ts';

export function createReportBuilderProvider(runtime: SandboxRuntime): ToolProvider {
  const label = 'internal tool "report_builder"';
  const tool = builtinTool({
    name: 'build_report',
    server: 'report_builder',
    description:
      'Save a report for the user as a file in your workspace (reports/). Markdown by default; with format "html", content is the HTML of the page body (or a whole document). Returns the file path; the user downloads it from the API.',
    parameters: Type.Object(
      {
        title: Type.String({ minLength: 1, maxLength: 200, description: 'The report title (also its file name)' }),
        content: Type.String({
          minLength: 1,
          maxLength: runtime.fileLimits.writeBytes,
          description: 'The report itself: Markdown, or HTML when format is "html"',
        }),
        format: Type.Optional(
          Type.Union(
            REPORT_FORMATS.map((format) => Type.Literal(format)),
            { description: 'markdown (default) or html' },
          ),
        ),
      },
      { additionalProperties: false },
    ),
    async run(args, context) {
      const workspace = await runtime.workspaceFor(context.orgId, context.agentId);
      try {
        const report = await saveReport(runtime, workspace, {
          title: args.title,
          content: args.content,
          format: args.format ?? 'markdown',
        });
        return {
          output: `saved ${report.path} (${report.bytes} bytes); the user can download it from GET /v1/agents/${context.agentId}/reports/${report.name}`,
          isError: false,
        };
      } catch (error) {
        if (error instanceof WorkspacePathError) return toolError(error.message);
        throw error;
      }
    },
  });
  return {
    name: 'report_builder',
    claims: internalEntry('report_builder'),
    async sources(_agent, claimed) {
      if (claimed.length === 0) return [];
      return [{ label, available: true, load: async () => ({ tools: [tool] }) }];
    },
  };
}
