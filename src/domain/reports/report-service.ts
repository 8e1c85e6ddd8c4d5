/**
 * Reading an agent's reports through the API: the files `build_report` (or a command in the sandbox) left under
 * `reports/` in the agent's workspace. The agent must belong to the caller's organization (another
 * organization's agent is a 404 like any unknown id); the files are reached only through the workspace file
 * functions (src/tools/builtin/report-files.ts), which never leave the workspace.
 */
import { notFound } from '../../errors/app-error.ts';
import { listReports, type ReportEntry, readReport } from '../../tools/builtin/report-files.ts';
import type { SandboxRuntime } from '../../tools/sandbox/sandbox-runtime.ts';
import type { AgentService } from '../agents/agent-service.ts';

export interface ReportView {
  object: 'report';
  name: string;
  path: string;
  format: ReportEntry['format'];
  bytes: number;
  /** Where the content is served. */
  url: string;
}

export interface ReportService {
  list(orgId: string, agentId: string): Promise<{ object: 'list'; data: ReportView[] }>;
  content(orgId: string, agentId: string, name: string): Promise<{ report: ReportView; content: Buffer }>;
}

const view = (agentId: string, entry: ReportEntry): ReportView => ({
  object: 'report',
  name: entry.name,
  path: entry.path,
  format: entry.format,
  bytes: entry.bytes,
  url: `/v1/agents/${agentId}/reports/${entry.name}`,
});

export function createReportService(deps: { agents: AgentService; runtime: SandboxRuntime }): ReportService {
  async function workspaceOf(orgId: string, agentId: string): Promise<{ id: string; workspace: string }> {
    const agent = await deps.agents.get(orgId, agentId);
    return { id: agent.id, workspace: await deps.runtime.workspaceFor(orgId, agent.id) };
  }

  return {
    async list(orgId, agentId) {
      const { id, workspace } = await workspaceOf(orgId, agentId);
      return { object: 'list', data: (await listReports(deps.runtime, workspace)).map((entry) => view(id, entry)) };
    },

    async content(orgId, agentId, name) {
      const { id, workspace } = await workspaceOf(orgId, agentId);
      const found = await readReport(deps.runtime, workspace, name);
      if (found === null) throw notFound('report', name);
      return { report: view(id, found.entry), content: found.content };
    },
  };
}
