/**
 * `build_report` and the report download routes: Markdown and HTML reports written by the model, listed and served
 * as attachments that cannot run script in this origin, names that never collide, unknown and malformed names,
 * another organization's agent, and files the sandbox puts in `reports/` (a symlink out of the workspace is never
 * served). Once per dialect.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { flows, type Json } from './helpers/fixtures.ts';
import { createHarness, dialects, type Harness, json } from './helpers/harness.ts';
import { describeSandbox } from './helpers/sandbox.ts';

const call = (tool: string, args: Json) => `call ${tool} ${JSON.stringify(args)}`;
const reply = (message: Json) => message.response?.parts[0]?.text as string;
const REPORTS = { kind: 'internal', name: 'report_builder' };

describe.each(dialects())('reports (%s)', (dialect) => {
  let h: Harness;
  const flow = flows(() => h);
  beforeAll(async () => {
    h = await createHarness(dialect);
  });
  afterAll(async () => {
    await h?.close();
  });

  it('writes Markdown and HTML reports, lists them and serves them as downloads that run nothing', async () => {
    const agentId = await flow.createAgent({ mcpServers: [REPORTS] });
    const html = '<p>Numbers</p><script>fetch("/v1/agents")</script>';
    const { message } = await flow.turn(
      agentId,
      [
        call('build_report', { title: 'Q3 Summary: Revenue & Costs', content: 'Revenue **grew**.' }),
        '---',
        call('build_report', { title: 'Q3 Summary: Revenue & Costs', content: 'Second version.' }),
        '---',
        call('build_report', { title: 'Dashboard <1>', content: html, format: 'html' }),
      ].join('\n'),
    );
    expect(message.status).toBe('completed');
    expect(reply(message)).toMatch(
      new RegExp(
        `^build_report: saved reports/dashboard-1\\.html \\(\\d+ bytes\\); the user can download it from GET /v1/agents/${agentId}/reports/dashboard-1\\.html$`,
      ),
    );

    const list = await h.request('GET', `/v1/agents/${agentId}/reports`);
    expect(list.status).toBe(200);
    expect(json(list)).toEqual({
      object: 'list',
      data: [
        expect.objectContaining({ object: 'report', name: 'dashboard-1.html', format: 'html' }),
        expect.objectContaining({ name: 'q3-summary-revenue-costs-2.md', format: 'markdown' }),
        {
          object: 'report',
          name: 'q3-summary-revenue-costs.md',
          path: 'reports/q3-summary-revenue-costs.md',
          format: 'markdown',
          bytes: 49,
          url: `/v1/agents/${agentId}/reports/q3-summary-revenue-costs.md`,
        },
      ],
    });

    const markdown = await h.request('GET', `/v1/agents/${agentId}/reports/q3-summary-revenue-costs.md`);
    expect(markdown.status).toBe(200);
    expect(markdown.text).toBe('# Q3 Summary: Revenue & Costs\n\nRevenue **grew**.\n');
    expect(markdown.headers['content-type']).toBe('text/markdown; charset=utf-8');
    expect(markdown.headers['content-disposition']).toBe(
      `attachment; filename="q3-summary-revenue-costs.md"; filename*=UTF-8''q3-summary-revenue-costs.md`,
    );

    const page = await h.request('GET', `/v1/agents/${agentId}/reports/dashboard-1.html`);
    expect(page.status).toBe(200);
    expect(page.headers['content-type']).toBe('text/html; charset=utf-8');
    expect(page.headers['content-disposition']).toContain('attachment;');
    expect(page.headers['x-content-type-options']).toBe('nosniff');
    expect(page.headers['content-security-policy']).toMatch(/default-src 'none'.*; sandbox$/);
    expect(page.text).toContain('<title>Dashboard &#60;1&#62;</title>');
    expect(page.text).toContain(html);
  });

  it('answers 404 for an unknown report or another organization, and 400 for a malformed name', async () => {
    const agentId = await flow.createAgent({ mcpServers: [REPORTS] });
    await flow.turn(agentId, call('build_report', { title: 'Mine', content: 'private' }));
    expect((await h.request('GET', `/v1/agents/${agentId}/reports/mine.md`)).status).toBe(200);
    const missing = await h.request('GET', `/v1/agents/${agentId}/reports/theirs.md`);
    expect(missing.status).toBe(404);
    expect(json(missing).error.code).toBe('not_found');
    for (const name of ['mine.txt', '.hidden.md', 'a%2F..%2Fmine.md']) {
      const bad = await h.request('GET', `/v1/agents/${agentId}/reports/${name}`);
      expect(bad.status, name).toBe(400);
      expect(json(bad).error.code).toBe('validation_error');
    }
    const invalid = await flow.turn(
      agentId,
      `${call('build_report', { title: 'No content' })}\n${call('build_report', { title: 'Odd', content: 'x', format: 'pdf' })}`,
    );
    expect(reply(invalid.message)).toContain('build_report: Error: invalid arguments: missing argument content');
    expect(reply(invalid.message)).toContain('build_report: Error: invalid arguments: format');
    const other = await h.createOrg(`reports-other-${dialect}`);
    for (const url of [`/v1/agents/${agentId}/reports`, `/v1/agents/${agentId}/reports/mine.md`]) {
      const foreign = await h.request('GET', url, { key: other.key });
      expect(foreign.status, url).toBe(404);
      expect(json(foreign).error.code).toBe('not_found');
    }
    // An agent without reports has an empty list.
    const empty = await flow.createAgent({});
    expect(json(await h.request('GET', `/v1/agents/${empty}/reports`)).data).toEqual([]);
  });

  describeSandbox('written by the sandbox', () => {
    it('lists reports a command wrote, never a symlink leading out of the workspace', async () => {
      const agentId = await flow.createAgent({ mcpServers: [{ kind: 'internal', name: 'sandbox' }] });
      const { message } = await flow.turn(
        agentId,
        call('sandbox_run', {
          command:
            'mkdir -p reports && echo "# From the shell" > reports/shell.md && ln -s /etc/passwd reports/passwd.md',
        }),
      );
      expect(reply(message)).toContain('exit code: 0');
      const names = (json(await h.request('GET', `/v1/agents/${agentId}/reports`)).data as Json[]).map((r) => r.name);
      expect(names).toEqual(['shell.md']);
      expect((await h.request('GET', `/v1/agents/${agentId}/reports/shell.md`)).text).toBe('# From the shell\n');
      const escaped = await h.request('GET', `/v1/agents/${agentId}/reports/passwd.md`);
      expect(escaped.status).toBe(404);
      expect(escaped.text).not.toContain('root:');
    });
  });
});
