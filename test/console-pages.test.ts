/**
 * Console pages for schedules and the approvals inbox, in Debian's Chromium (playwright-core) against a real
 * Agentry process with the scripted model and a real MCP server on loopback. Each test stands alone: its own
 * browser context, its own sign-in, the agents and schedules it reads made through the API. No timing is asserted;
 * waits are for conditions.
 */
import { randomUUID } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Browser, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ensureConsoleBuilt } from '../scripts/console-build.ts';
import { chromiumAvailable, launchChromium, seriousViolations } from './helpers/browser.ts';
import { WAIT_MS } from './helpers/deadlines.ts';
import { httpClient, textParts, waitUntil } from './helpers/fixtures.ts';
import { testKey } from './helpers/harness.ts';
import { type McpTestServer, startModernMcpServer } from './helpers/mcp-servers.ts';
import { type ServerProcess, startServerProcess } from './helpers/server-process.ts';

const WAIT = { timeout: WAIT_MS };
const available = chromiumAvailable();
if (!available && process.env.CI === 'true') throw new Error('the console tests need /usr/bin/chromium under CI');

const key = testKey();
let server: ServerProcess;
let dataDir: string;
let browser: Browser;
let mcp: McpTestServer;
let api: ReturnType<typeof httpClient>;

/** A page in a browser context of its own, signed in with the admin key; script errors and CSP refusals collected. */
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

async function createAgent(fields: Record<string, unknown>): Promise<string> {
  const created = await api('POST', '/v1/agents', fields);
  expect(created.status, JSON.stringify(created.body)).toBe(201);
  return created.body.agent.id;
}

describe.skipIf(!available)('console pages', () => {
  beforeAll(async () => {
    ensureConsoleBuilt();
    dataDir = mkdtempSync(join(tmpdir(), 'agentry-console-pages-'));
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

  it('creates a schedule with a preview of its next runs, runs it now, links its run to the trace, pauses and deletes it', async () => {
    const problems: string[] = [];
    const agentName = `scheduled-${randomUUID().slice(0, 8)}`;
    await createAgent({ name: agentName });
    const page = await signedIn(problems);
    await page.getByRole('link', { name: 'Schedules' }).click();
    await page.getByRole('heading', { name: 'Schedules', level: 1 }).waitFor();
    await page.getByRole('button', { name: 'New schedule' }).click();
    const form = page.getByRole('form', { name: 'New schedule' });
    await form.getByLabel('Schedule name').fill('morning report');
    await form.getByLabel('Agent').selectOption({ label: agentName });
    await form.getByLabel('Input').fill('Good morning');
    await form.getByLabel('Cron', { exact: true }).fill('0 9 * * *');
    await form.getByLabel('Time zone').fill('UTC');
    // The preview comes from the API: five times, each at 09:00 UTC.
    const preview = form.getByRole('region', { name: 'Next runs' }).locator('time');
    await expect.poll(() => preview.count(), WAIT).toBe(5);
    for (const at of await preview.evaluateAll((nodes) => nodes.map((node) => node.getAttribute('datetime')))) {
      expect(at).toMatch(/T09:00:00\.000Z$/);
    }
    // An invalid expression is explained at the field by the API, before saving.
    await form.getByLabel('Cron', { exact: true }).fill('0 9 * *');
    await form.getByRole('alert').first().waitFor();
    expect(await form.getByRole('alert').first().textContent()).toContain('cron');
    await form.getByLabel('Cron', { exact: true }).fill('0 9 * * *');
    await form.getByRole('button', { name: 'Create schedule' }).click();
    await page.getByRole('heading', { name: 'morning report', level: 1 }).waitFor();
    const listed = (await api('GET', '/v1/schedules')).body.data;
    expect(listed.map((schedule: { name: string }) => schedule.name)).toContain('morning report');
    expect(await seriousViolations(page)).toEqual([]);

    await page.getByRole('button', { name: 'Run now' }).click();
    const trace = page.getByRole('link', { name: /^Trace of run / });
    await trace.first().waitFor();
    await expect.poll(() => page.locator('table .badge').first().textContent(), WAIT).toBe('completed');
    await trace.first().click();
    await page.getByRole('heading', { level: 1 }).filter({ hasText: /run/i }).first().waitFor();
    expect(page.url()).toMatch(/\/console\/runs\/[0-9a-f-]{36}$/);
    await page.goBack();

    await page.getByRole('button', { name: 'Pause', exact: true }).click();
    await page.getByText('It stops running on its timing').waitFor();
    await page.getByRole('button', { name: 'Confirm pause' }).click();
    await page.getByRole('button', { name: 'Resume' }).waitFor();
    expect(await page.getByText('none while paused').count()).toBe(1);
    await page.getByRole('button', { name: 'Delete', exact: true }).click();
    await page.getByText('Delete morning report and its run history?').waitFor();
    await page.getByRole('button', { name: 'Confirm delete' }).click();
    await page.getByRole('heading', { name: 'Schedules', level: 1 }).waitFor();
    await expect
      .poll(async () => (await api('GET', '/v1/schedules')).body.data.map((s: { name: string }) => s.name), WAIT)
      .not.toContain('morning report');
    expect(problems).toEqual([]);
    await page.context().close();
  });

  it('lists tool calls waiting for approval across sessions and approves one in place', async () => {
    const problems: string[] = [];
    const agentName = `careful-${randomUUID().slice(0, 8)}`;
    const agentId = await createAgent({
      name: agentName,
      mcpServers: [{ type: 'url', name: 'ops', url: mcp.url }],
      toolApprovals: { default: 'always_ask', overrides: {} },
    });
    const session = await api('POST', '/v1/sessions', { agentId });
    const sessionId: string = session.body.session.id;
    const posted = await api(
      'POST',
      `/v1/sessions/${sessionId}/messages`,
      textParts('call count {"key":"inbox-page"}\n---\nall done'),
      { 'idempotency-key': randomUUID() },
    );
    const messageId: string = posted.body.id;
    await waitUntil(
      async () =>
        (await api('GET', `/v1/sessions/${sessionId}/messages/${messageId}`)).body.message.status === 'requires_action',
      { what: 'the call to wait for approval' },
    );
    const page = await signedIn(problems);
    await page.getByRole('link', { name: 'Approvals' }).click();
    const card = page.getByRole('form', { name: `Approval of count for ${agentName}` });
    await card.waitFor();
    expect(await card.textContent()).toContain('{"key":"inbox-page"}');
    expect(await card.textContent()).toContain('ops');
    expect(await seriousViolations(page)).toEqual([]);
    await card.getByRole('button', { name: 'Approve' }).click();
    await card.waitFor({ state: 'detached' });
    const done = await waitUntil(
      async () => {
        const message = (await api('GET', `/v1/sessions/${sessionId}/messages/${messageId}`)).body.message;
        return message.status === 'completed' ? message : null;
      },
      { what: 'the approved turn to complete' },
    );
    expect(done.status).toBe('completed');
    expect(mcp.counts['inbox-page']).toBe(1);
    expect(problems).toEqual([]);
    await page.context().close();
  });
});
