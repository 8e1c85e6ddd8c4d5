/**
 * The console's administration pages and forms in Debian's Chromium (playwright-core) against a real Agentry
 * process, and GET /v1/tools/builtin over loopback HTTP on both databases. The audit log shows an agent's
 * creation and change with the fields changed; settings read the limits and change retention only after a
 * confirmation that says what is deleted (the API shows the change); a form with several errors shows all of them
 * at once in words for people, each at its field, including a connector row and an API error on an MCP server
 * row; a built-in tool this server cannot run says why before it is chosen; a destructive action waits for its
 * confirmation. Each test stands alone: its own browser context, its own sign-in, the data it reads made through
 * the API. Waits are for conditions.
 */
import { randomUUID } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Browser, Locator, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ensureConsoleBuilt } from '../scripts/console-build.ts';
import { chromiumAvailable, launchChromium, seriousViolations } from './helpers/browser.ts';
import { WAIT_MS } from './helpers/deadlines.ts';
import { httpClient } from './helpers/fixtures.ts';
import { createHarness, dialects, type Harness, testKey } from './helpers/harness.ts';
import { type McpTestServer, startModernMcpServer } from './helpers/mcp-servers.ts';
import { type ServerProcess, startServerProcess } from './helpers/server-process.ts';

const WAIT = { timeout: WAIT_MS };
const available = chromiumAvailable();
if (!available && process.env.CI === 'true') throw new Error('the console tests need /usr/bin/chromium under CI');

describe.each(dialects())('GET /v1/tools/builtin (%s)', (dialect) => {
  let h: Harness;
  let base: string;
  const get = async (key: string) => {
    const response = await fetch(`${base}/v1/tools/builtin`, { headers: { authorization: `Bearer ${key}` } });
    return { status: response.status, body: (await response.json()) as Record<string, any> };
  };

  beforeAll(async () => {
    h = await createHarness(dialect);
    base = await h.listen();
  });
  afterAll(async () => {
    await h?.close();
  });

  it('lists every built-in tool with whether it runs here and why not, as the agent warnings say', async () => {
    const answer = await get(h.key);
    expect(answer.status).toBe(200);
    const byName = new Map(answer.body.data.map((tool: { name: string }) => [tool.name, tool]));
    const schema = (await (await fetch(`${base}/v1/openapi.json`)).json()) as Record<string, any>;
    expect(schema.paths['/v1/tools/builtin'].get).toBeDefined();
    expect(byName.get('http_client')).toMatchObject({ object: 'builtin_tool', available: true, reason: null });
    expect(byName.get('memory')).toMatchObject({ available: true, reason: null });
    const coding = byName.get('coding_agent') as { available: boolean; reason: string };
    expect(coding.available).toBe(false);
    // The same words an agent that lists it is warned with.
    const agent = await h.request('POST', '/v1/agents', {
      body: { name: 'overreaching', mcpServers: [{ kind: 'internal', name: 'coding_agent' }] },
    });
    expect(agent.status).toBe(201);
    const warnings = (agent.body as Record<string, any>).warnings.map(
      (warning: { message: string }) => warning.message,
    );
    expect(warnings).toContain(coding.reason);
    // The sandbox is unavailable exactly when this machine cannot sandbox, and then says why.
    const sandbox = byName.get('sandbox') as { available: boolean; reason: string | null };
    const host = h.deps.sandbox.available();
    expect(sandbox.available).toBe(host.available);
    if (!host.available) expect(sandbox.reason).toContain(host.reason);
  });

  it('needs agents:read', async () => {
    const { orgId } = await h.createOrg(`tools-${dialect}-${randomUUID().slice(0, 8)}`);
    const files = await h.deps.orgs.createKey(orgId, ['files:read']);
    expect((await get(files)).status).toBe(403);
    const reader = await h.deps.orgs.createKey(orgId, ['agents:read']);
    expect((await get(reader)).status).toBe(200);
    expect((await get('agk_not-a-key')).status).toBe(401);
  });
});

describe.skipIf(!available)('console administration', () => {
  const key = testKey();
  let server: ServerProcess;
  let dataDir: string;
  let browser: Browser;
  let mcp: McpTestServer;
  let api: ReturnType<typeof httpClient>;

  /** A page in a browser context of its own, signed in; script errors and CSP refusals collected. */
  async function signedIn(problems: string[]): Promise<Page> {
    const context = await browser.newContext({ viewport: { width: 1200, height: 760 }, colorScheme: 'light' });
    context.setDefaultTimeout(WAIT_MS);
    const page = await context.newPage();
    page.on('pageerror', (error) => problems.push(`page error: ${error.message}`));
    page.on('console', (message) => {
      if (/Content.Security.Policy|Refused to/i.test(message.text())) problems.push(`CSP: ${message.text()}`);
    });
    await page.goto(`${server.url}/console/sign-in`);
    await page.getByLabel('API key').fill(key);
    await page.getByRole('button', { name: 'Sign in' }).click();
    await page.getByRole('heading', { name: 'Agents', level: 1 }).waitFor();
    return page;
  }

  /** The error text a field shows (through its aria-describedby), or null. */
  async function fieldError(field: Locator): Promise<string | null> {
    if ((await field.getAttribute('aria-invalid')) !== 'true') return null;
    const described = (await field.getAttribute('aria-describedby')) ?? '';
    const errorId = described.split(' ').find((id) => id.endsWith('-error'));
    return errorId === undefined ? null : field.page().locator(`[id="${errorId}"]`).textContent();
  }

  beforeAll(async () => {
    ensureConsoleBuilt();
    dataDir = mkdtempSync(join(tmpdir(), 'agentry-console-admin-'));
    [server, browser, mcp] = await Promise.all([
      startServerProcess({
        AGENTRY_DATA_DIR: dataDir,
        AGENTRY_BOOTSTRAP_KEY: key,
        AGENTRY_ALLOW_INSECURE_DESTINATIONS: 'true',
        AGENTRY_POLL_MS: '200',
      }),
      launchChromium(),
      startModernMcpServer({ name: 'ops' }),
    ]);
    api = httpClient(server.url, key);
  });
  afterAll(async () => {
    await browser?.close();
    await server?.stop();
    await mcp?.close();
    if (dataDir !== undefined) rmSync(dataDir, { recursive: true, force: true });
  });

  it('shows the audit log of an agent created and changed, with the fields changed, filtered by resource type', async () => {
    const problems: string[] = [];
    const name = `audited-${randomUUID().slice(0, 8)}`;
    const created = await api('POST', '/v1/agents', { name, instructions: 'First.' });
    expect(created.status).toBe(201);
    const agentId: string = created.body.agent.id;
    const changed = await api('PATCH', `/v1/agents/${agentId}`, { instructions: 'Second.', maxSteps: 4 });
    expect(changed.status).toBe(200);
    const entries = (await api('GET', `/v1/audit_log?target_id=${agentId}`)).body.data;
    const updated = entries.find((entry: { action: string }) => entry.action === 'agent.updated');
    expect(updated.after.changed_fields).toEqual(expect.arrayContaining(['instructions', 'maxSteps']));

    const page = await signedIn(problems);
    await page.getByRole('link', { name: 'Audit log' }).click();
    await page.getByRole('heading', { name: 'Audit log', level: 1 }).waitFor();
    await page.getByLabel('Resource type').selectOption('agent');
    await expect.poll(() => new URL(page.url()).searchParams.get('type'), WAIT).toBe('agent');
    const rows = page.getByRole('region', { name: 'Audit log' }).locator('tbody tr');
    const update = rows
      .filter({ hasText: 'agent.updated' })
      .filter({ hasText: agentId.slice(-8) })
      .first();
    await update.waitFor();
    const text = (await update.textContent()) ?? '';
    expect(text).toMatch(/Changed (instructions, maxSteps|maxSteps, instructions)/);
    expect(text).toContain('API key agk_');
    // The request id, whole on hover; the time relative, exact on hover.
    expect(await update.getByRole('button', { name: `Copy request id ${updated.request_id}` }).count()).toBe(1);
    expect(await update.locator('time').getAttribute('title')).not.toBeNull();
    const creation = rows
      .filter({ hasText: 'agent.created' })
      .filter({ hasText: agentId.slice(-8) })
      .first();
    await creation.waitFor();
    // Other resource types are filtered out by the API.
    expect(await rows.filter({ hasText: 'organization.created' }).count()).toBe(0);
    expect(await seriousViolations(page)).toEqual([]);
    expect(problems).toEqual([]);
  });

  it('shows the settings and shortens retention only after a confirmation that says what is deleted', async () => {
    const problems: string[] = [];
    const before = await api('GET', '/v1/organization/retention');
    expect(before.body.organization.runs_days).toBeNull();
    const page = await signedIn(problems);
    await page.getByRole('link', { name: 'Settings' }).click();
    await page.getByRole('heading', { name: 'Settings', level: 1 }).waitFor();
    const limits = page.getByRole('region', { name: 'Limits', exact: true });
    await expect.poll(() => limits.textContent(), WAIT).toContain('The organization');
    expect(await limits.textContent()).toContain('unlimited');
    const form = page.getByRole('form', { name: 'Data retention' });
    // Errors first: every field at once.
    await form.getByLabel('Runs (days)').fill('seven');
    await form.getByLabel('Files (days)').fill('-1');
    await form.getByRole('button', { name: 'Save retention' }).click();
    await expect.poll(() => fieldError(form.getByLabel('Runs (days)')), WAIT).toBe('Runs must be a whole number');
    expect(await fieldError(form.getByLabel('Files (days)'))).toBe('Files must be at least 0');
    await form.getByLabel('Files (days)').fill('');
    await form.getByLabel('Runs (days)').fill('7');
    await form.getByRole('button', { name: 'Save retention' }).click();
    const consequence = form.getByRole('group', { name: 'Save retention' });
    await consequence.waitFor();
    expect(await consequence.textContent()).toContain(
      'Runs: ended runs with their traces, by creation, older than 7 days',
    );
    // Nothing changed before the confirmation.
    expect((await api('GET', '/v1/organization/retention')).body.organization.runs_days).toBeNull();
    await form.getByRole('button', { name: 'Delete older data and save' }).click();
    await form.getByText('Saved.').waitFor();
    const after = await api('GET', '/v1/organization/retention');
    expect(after.body).toMatchObject({ runs_days: 7, organization: { runs_days: 7 } });
    // Back to the default: nothing is shortened, so no confirmation.
    await form.getByLabel('Runs (days)').fill('');
    await form.getByRole('button', { name: 'Save retention' }).click();
    await expect
      .poll(async () => (await api('GET', '/v1/organization/retention')).body.organization.runs_days, WAIT)
      .toBeNull();
    expect(await seriousViolations(page)).toEqual([]);
    expect(problems).toEqual([]);
  });

  it('shows every error of a form at once, in words for people, each at its field, connector and server rows included', async () => {
    const problems: string[] = [];
    const connector = await api('POST', '/v1/mcp_servers', { name: `ops-${randomUUID().slice(0, 6)}`, url: mcp.url });
    expect(connector.status, JSON.stringify(connector.body)).toBe(201);
    const page = await signedIn(problems);
    await page.goto(`${server.url}/console/agents/new`);
    const form = page.getByRole('form', { name: 'New agent' });
    await form.getByLabel('Max steps').fill('500');
    await form.getByRole('button', { name: 'Add server by URL' }).click();
    await form.getByLabel('Server 1 URL').fill('not a url');
    await form.getByRole('button', { name: 'Add connector' }).click();
    await form.getByRole('button', { name: 'Add connector' }).click();
    await form.getByLabel('Connector 2', { exact: true }).selectOption(connector.body.id);
    await form.getByLabel('Connector 1', { exact: true }).selectOption(connector.body.id);
    await form.getByLabel('Budget (USD)').fill('lots');
    await form.getByRole('button', { name: 'Create agent' }).click();
    const expected: [string, string][] = [
      ['Name', 'Name is required'],
      ['Max steps', 'Max steps must be at most 128'],
      ['Server 1 name', 'Server 1 name is required'],
      ['Server 1 URL', 'Server 1 URL must be a URL, e.g. https://example.com/mcp'],
      ['Connector 2', 'Connector 2 is the same as Connector 1'],
      ['Budget (USD)', 'Budget must be a number of US dollars, 0 or more'],
    ];
    await expect.poll(() => fieldError(form.getByLabel('Name', { exact: true })), WAIT).toBe('Name is required');
    for (const [label, message] of expected) {
      expect(await fieldError(form.getByLabel(label, { exact: true })), label).toBe(message);
    }
    const summary = form.getByRole('alert').filter({ hasText: 'The agent was not saved' });
    expect(await summary.locator('li').allTextContents()).toEqual(expected.map(([, message]) => message));
    expect(await seriousViolations(page)).toEqual([]);

    // What only the API knows lands at the row it names: mcpServers[2] is the second server by URL.
    await form.getByLabel('Name', { exact: true }).fill('Checked');
    await form.getByLabel('Max steps').fill('8');
    await form.getByLabel('Budget (USD)').fill('5');
    await form.getByRole('button', { name: 'Remove connector 2' }).click();
    await form.getByLabel('Server 1 name').fill('docs');
    await form.getByLabel('Server 1 URL').fill(`${mcp.url}?docs`);
    await form.getByRole('button', { name: 'Add server by URL' }).click();
    await form.getByLabel('Server 2 name').fill('docs');
    await form.getByLabel('Server 2 URL').fill(`${mcp.url}?again`);
    await form.getByRole('button', { name: 'Create agent' }).click();
    await expect
      .poll(() => fieldError(form.getByLabel('Server 2 name', { exact: true })), WAIT)
      .toBe('Server 2 duplicates Server 1');
    expect(await fieldError(form.getByLabel('Name', { exact: true }))).toBeNull();

    await form.getByRole('button', { name: 'Remove server 2' }).click();
    await form.getByRole('button', { name: 'Create agent' }).click();
    await page.getByRole('heading', { name: 'Checked', level: 1 }).waitFor();
    const agentId = /\/agents\/([0-9a-f-]{36})$/.exec(page.url())?.[1] ?? '';
    const stored = (await api('GET', `/v1/agents/${agentId}`)).body.agent;
    expect(stored).toMatchObject({ maxSteps: 8, budget: { limitUsd: 5, period: 'month' } });

    // The webhook form: all at once too.
    await page.goto(`${server.url}/console/webhooks`);
    await page.getByRole('button', { name: 'New endpoint' }).click();
    const hook = page.getByRole('form', { name: 'New webhook endpoint' });
    await hook.getByRole('button', { name: 'Create endpoint' }).click();
    await expect.poll(() => fieldError(hook.getByLabel('Endpoint name')), WAIT).toBe('Endpoint name is required');
    expect(await fieldError(hook.getByLabel('Endpoint URL'))).toBe('Endpoint URL is required');
    expect(await hook.getByRole('group', { name: 'Events' }).getByText('Choose at least one event type').count()).toBe(
      1,
    );
    expect(problems).toEqual([]);
  });

  it('marks the built-in tools this server cannot run, with the reason, before they are chosen', async () => {
    const problems: string[] = [];
    const page = await signedIn(problems);
    await page.goto(`${server.url}/console/agents/new`);
    const coding = page.getByRole('checkbox', { name: 'coding_agent' });
    await expect.poll(() => coding.isDisabled(), WAIT).toBe(true);
    const described = (await coding.getAttribute('aria-describedby')) ?? '';
    const reason = await page.locator(`[id="${described}"]`).textContent();
    expect(reason).toMatch(/^Cannot run on this server: internal tool "coding_agent" .*cannot run it/);
    expect(await page.getByRole('checkbox', { name: 'http_client' }).isDisabled()).toBe(false);

    // An agent that lists one anyway can still remove it; the warning is at the top and at the tools.
    const created = await api('POST', '/v1/agents', {
      name: `overreaching-${randomUUID().slice(0, 6)}`,
      mcpServers: [{ kind: 'internal', name: 'github' }],
    });
    await page.goto(`${server.url}/console/agents/${created.body.agent.id}`);
    const github = page.getByRole('checkbox', { name: 'github' });
    await expect.poll(() => github.isChecked(), WAIT).toBe(true);
    expect(await github.isDisabled()).toBe(false);
    await page
      .getByRole('status', { name: 'Warnings' })
      .getByText(/internal tool "github"/)
      .waitFor();
    const group = page.getByRole('group', { name: 'Built-in tools' });
    expect(await group.locator('.field-warning').allTextContents()).toEqual([
      expect.stringContaining('internal tool "github"'),
    ]);
    expect(await seriousViolations(page)).toEqual([]);
    expect(problems).toEqual([]);
  });

  it('deletes a session only after the confirmation that says what happens', async () => {
    const problems: string[] = [];
    const agent = await api('POST', '/v1/agents', { name: `doomed-${randomUUID().slice(0, 6)}` });
    const session = await api('POST', '/v1/sessions', { agentId: agent.body.agent.id });
    expect(session.status, JSON.stringify(session.body)).toBe(201);
    const sessionId: string = session.body.session.id;
    const page = await signedIn(problems);
    await page.goto(`${server.url}/console/sessions/${sessionId}`);
    await page.getByRole('button', { name: 'Delete session' }).click();
    await page.getByText('A running turn is interrupted; its runs and traces are kept.').waitFor();
    expect((await api('GET', `/v1/sessions/${sessionId}`)).status).toBe(200);
    await page.getByRole('button', { name: 'Cancel' }).click();
    await page.getByRole('button', { name: 'Delete session' }).click();
    await page.getByRole('button', { name: 'Confirm delete' }).click();
    await expect.poll(async () => (await api('GET', `/v1/sessions/${sessionId}`)).status, WAIT).toBe(404);
    expect(problems).toEqual([]);
  });
});
