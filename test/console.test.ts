/**
 * The web console in a real browser (Debian's Chromium through playwright-core) against a real Agentry process
 * with the scripted model: sign in, create an agent after fixing a validation error, chat with streamed text seen
 * before the turn completes, answer a question, submit a client tool's output, approve and deny a tool call,
 * interrupt, reconnect after a dropped stream, read a run's trace, create a webhook endpoint and see its
 * deliveries, files and usage. Every
 * main page passes axe-core without serious or critical violations, under the strict CSP, which no page breaks.
 * With AGENTRY_CONSOLE_SCREENSHOTS=<dir> it also saves a screenshot of each page (docs/console/ holds them).
 */
import { mkdirSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { gzipSync } from 'node:zlib';
import type { Browser, BrowserContext, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CONSOLE_DIR, ensureConsoleBuilt } from '../scripts/console-build.ts';
import { chromiumAvailable, launchChromium, paintTimings, seriousViolations } from './helpers/browser.ts';
import { testKey } from './helpers/harness.ts';
import { runCli, type ServerProcess, startServerProcess } from './helpers/server-process.ts';
import { type Receiver, startReceiver } from './helpers/webhook-receiver.ts';

const SCREENSHOTS = process.env.AGENTRY_CONSOLE_SCREENSHOTS ?? null;
const INITIAL_JS_BUDGET = 250 * 1024;
const PAINT_BUDGET_MS = 1000;
const WAIT = { timeout: 15_000 };

const available = chromiumAvailable();
if (!available && process.env.CI === 'true') throw new Error('the console tests need /usr/bin/chromium under CI');
if (!available)
  process.stdout.write('\n[agentry] NOTICE: console browser tests SKIPPED: /usr/bin/chromium is missing\n\n');

describe.skipIf(!available)('web console', () => {
  const key = testKey();
  let dataDir: string;
  let serverEnv: Record<string, string> = {};
  let server: ServerProcess;
  let receiver: Receiver;
  let browser: Browser;
  let context: BrowserContext;
  let page: Page;
  const problems: string[] = [];
  let agentId = '';
  let sessionId = '';

  const url = (path: string) => `${server.url}${path}`;
  const api = async (method: string, path: string, body?: unknown, headers: Record<string, string> = {}) => {
    const response = await fetch(url(path), {
      method,
      headers: {
        authorization: `Bearer ${key}`,
        ...(body === undefined ? {} : { 'content-type': 'application/json' }),
        ...headers,
      },
      ...(body === undefined ? {} : { body: JSON.stringify(body) }),
    });
    return { status: response.status, body: (await response.json()) as any };
  };

  /** Watches a page for script errors and CSP refusals: the console must run clean under its policy. */
  const watch = (target: Page) => {
    target.on('pageerror', (error) => problems.push(`page error: ${error.message}`));
    target.on('console', (message) => {
      const text = message.text();
      if (/Content.Security.Policy|Refused to/i.test(text)) problems.push(`CSP: ${text}`);
      else if (message.type() === 'error' && !/Failed to load resource/.test(text)) problems.push(`console: ${text}`);
    });
  };

  const snap = async (name: string, target: Page = page) => {
    if (SCREENSHOTS === null) return;
    mkdirSync(SCREENSHOTS, { recursive: true });
    await target.screenshot({ path: join(SCREENSHOTS, `${name}.png`) });
  };

  const accessible = async (what: string, target: Page = page) => {
    expect(await seriousViolations(target), `${what}: serious or critical accessibility violations`).toEqual([]);
  };

  const lastTurn = () => page.locator('li.turn').last();

  const send = async (text: string) => {
    const before = await page.locator('li.turn').count();
    await page.getByLabel('Message', { exact: true }).fill(text);
    await page.getByRole('button', { name: 'Send', exact: true }).click();
    await expect.poll(() => page.locator('li.turn').count(), WAIT).toBe(before + 1);
    return lastTurn();
  };

  beforeAll(async () => {
    ensureConsoleBuilt();
    receiver = await startReceiver();
    dataDir = mkdtempSync(join(tmpdir(), 'agentry-console-'));
    serverEnv = {
      AGENTRY_DATA_DIR: dataDir,
      AGENTRY_BOOTSTRAP_KEY: key,
      AGENTRY_ALLOW_INSECURE_DESTINATIONS: 'true',
      AGENTRY_WEBHOOK_RETRY_BASE_MS: '200',
      AGENTRY_POLL_MS: '200',
    };
    server = await startServerProcess(serverEnv);
    browser = await launchChromium();
    context = await browser.newContext({ viewport: { width: 1200, height: 760 }, colorScheme: 'light' });
    page = await context.newPage();
    watch(page);
  }, 90_000);

  afterAll(async () => {
    await browser?.close();
    await server?.stop();
    await receiver?.close();
    if (dataDir !== undefined) rmSync(dataDir, { recursive: true, force: true });
  });

  it('is served at /console with a strict CSP, / redirects there, hashed assets are cached for good', async () => {
    const root = await fetch(url('/'), { redirect: 'manual' });
    expect(root.status).toBe(302);
    expect(root.headers.get('location')).toBe('/console/');
    const html = await fetch(url('/console/agents/some-id/chat'));
    expect(html.status).toBe(200);
    expect(html.headers.get('content-type')).toContain('text/html');
    const csp = html.headers.get('content-security-policy') ?? '';
    expect(csp).toContain("script-src 'self'");
    expect(csp).toContain("default-src 'none'");
    expect(csp).not.toContain('unsafe-inline');
    expect(csp).not.toContain('unsafe-eval');
    expect(html.headers.get('cache-control')).toBe('no-cache');
    const body = await html.text();
    expect(body).not.toMatch(/<script(?![^>]*\bsrc=)[^>]*>/);
    const script = /src="(\/console\/assets\/[^"]+\.js)"/.exec(body)?.[1] ?? '';
    const asset = await fetch(url(script), { headers: { 'accept-encoding': 'gzip' } });
    expect(asset.status).toBe(200);
    expect(asset.headers.get('cache-control')).toBe('public, max-age=31536000, immutable');
    expect((await fetch(url('/console/assets/nothing-here.js'))).status).toBe(404);
    expect((await fetch(url('/console/assets/../../package.json'))).status).not.toBe(200);
    // Not part of the API: the OpenAPI document does not list the console's pages.
    const document = (await (await fetch(url('/v1/openapi.json'))).json()) as { paths: Record<string, unknown> };
    // (The older API under /api/sdk is API.)
    const pages = Object.keys(document.paths).filter(
      (path) => !path.startsWith('/v1/') && !path.startsWith('/api/sdk/') && !path.endsWith('z'),
    );
    expect(pages).toEqual([]);
    expect(server.output()).toContain(`web console: ${server.url}/console/`);
  });

  it('keeps the initial JavaScript under 250 KB gzipped', () => {
    const index = readFileSync(join(CONSOLE_DIR, 'dist', 'index.html'), 'utf8');
    const initial = [...index.matchAll(/(?:src|href)="\/console\/(assets\/[^"]+\.js)"/g)].map(
      (match) => match[1] ?? '',
    );
    expect(initial.length).toBeGreaterThan(0);
    const gzipped = initial.reduce(
      (sum, file) => sum + gzipSync(readFileSync(join(CONSOLE_DIR, 'dist', file)), { level: 9 }).length,
      0,
    );
    process.stdout.write(`[console] initial JS: ${initial.length} files, ${(gzipped / 1024).toFixed(1)} KB gzipped\n`);
    expect(gzipped).toBeLessThan(INITIAL_JS_BUDGET);
  });

  it('signs in with an API key kept in session storage, and paints within the budget', async () => {
    await page.goto(url('/console/agents'));
    await page.getByLabel('API key').waitFor(WAIT);
    expect(page.url()).toContain('/console/sign-in');
    expect(await page.title()).toMatch(/^Sign in/);
    const { fcp, lcp } = await paintTimings(page);
    process.stdout.write(`[console] sign-in page: first contentful paint ${fcp} ms, largest ${lcp} ms\n`);
    expect(fcp).not.toBeNull();
    expect(fcp ?? Number.POSITIVE_INFINITY).toBeLessThan(PAINT_BUDGET_MS);
    expect(lcp ?? fcp ?? Number.POSITIVE_INFINITY).toBeLessThan(PAINT_BUDGET_MS);
    await accessible('sign-in');
    await snap('sign-in');

    await page.getByLabel('API key').fill('agk_wrongwrongwrongwrongwrongwrongwrongwrong');
    await page.getByRole('button', { name: 'Sign in' }).click();
    await expect.poll(() => page.getByRole('alert').first().textContent(), WAIT).toContain('invalid_api_key');

    // Keyboard only: the field, then Enter.
    await page.getByLabel('API key').fill(key);
    await page.getByLabel('API key').press('Enter');
    await page.getByRole('heading', { name: 'Agents', level: 1 }).waitFor(WAIT);
    expect(new URL(page.url()).pathname).toBe('/console/agents');
    expect(await page.title()).toMatch(/^Agents/);
    await expect.poll(() => page.locator('.who').textContent(), WAIT).toContain('default');
    expect(await page.locator('.who').textContent()).toContain('webhooks:write');
    // Page expressions are text: this Node.js project does not load the DOM's types.
    expect(await page.evaluate("sessionStorage.getItem('agentry.apiKey')")).toBe(key);
    expect(await page.evaluate('document.cookie')).toBe('');
    expect(await page.evaluate('localStorage.length')).toBe(0);
    expect(page.url()).not.toContain(key);
    await accessible('agents');
    await snap('agents');
  });

  it('hides what a read-only key cannot do', async () => {
    const created = runCli(['keys', 'create', '--org', 'default', '--scopes', 'tasks:read'], {
      AGENTRY_DATA_DIR: dataDir,
    });
    expect(created.status).toBe(0);
    const readOnly = created.stdout.trim();
    const other = await browser.newContext();
    const reader = await other.newPage();
    watch(reader);
    await reader.goto(url('/console/sign-in'));
    await reader.getByLabel('API key').fill(readOnly);
    await reader.getByRole('button', { name: 'Sign in' }).click();
    await reader.getByRole('heading', { name: 'Agents', level: 1 }).waitFor(WAIT);
    await expect.poll(() => reader.locator('.who').textContent(), WAIT).toContain('tasks:read');
    expect(await reader.getByRole('link', { name: 'New agent' }).count()).toBe(0);
    expect(await reader.getByRole('link', { name: 'Webhooks' }).count()).toBe(0);
    expect(await reader.getByRole('link', { name: 'Files' }).count()).toBe(0);
    expect(await reader.getByRole('link', { name: 'Runs' }).count()).toBeGreaterThan(0);
    await other.close();
  });

  it('creates an agent, showing the API validation error beside its field until it is fixed', async () => {
    await page.getByRole('link', { name: 'New agent' }).click();
    await page.getByLabel('Name', { exact: true }).waitFor(WAIT);
    expect(await page.title()).toMatch(/^New agent/);
    await page.getByLabel('Name', { exact: true }).fill('Helper');
    await page.getByLabel('Instructions').fill('Be brief.');
    await page.getByLabel('Max steps').fill('500');
    await page.getByRole('checkbox', { name: 'ask_user_question' }).check();
    await page.getByRole('button', { name: 'Add client tool' }).click();
    await page.getByLabel('Tool 1 name').fill('get_weather');
    await page.getByLabel('Tool 1 description').fill('Weather for a city');
    await page
      .getByLabel('Tool 1 parameters (JSON Schema)')
      .fill(
        '{"type":"object","properties":{"city":{"type":"string"}},"required":["city"],"additionalProperties":false}',
      );
    await accessible('agent editor');
    await page.getByRole('button', { name: 'Create agent' }).click();
    const maxSteps = page.getByLabel('Max steps');
    await expect.poll(() => maxSteps.getAttribute('aria-invalid'), WAIT).toBe('true');
    const described = (await maxSteps.getAttribute('aria-describedby')) ?? '';
    const errorId = described.split(' ').find((id) => id.endsWith('-error')) ?? '';
    expect(await page.locator(`[id="${errorId}"]`).textContent()).toMatch(/maxSteps must be <= 128/);
    // Focus moves to the field the API named.
    const fieldId = await maxSteps.getAttribute('id');
    await expect.poll(() => page.evaluate('document.activeElement?.id'), WAIT).toBe(fieldId);
    await snap('agent-editor-error');
    expect(new URL(page.url()).pathname).toBe('/console/agents/new');

    await maxSteps.fill('5');
    await page.getByRole('button', { name: 'Create agent' }).click();
    await page.getByRole('heading', { name: 'Helper', level: 1 }).waitFor(WAIT);
    agentId = /\/console\/agents\/([0-9a-f-]{36})$/.exec(new URL(page.url()).pathname)?.[1] ?? '';
    expect(agentId).not.toBe('');
    const stored = await api('GET', `/v1/agents/${agentId}`);
    expect(stored.body.agent).toMatchObject({ name: 'Helper', maxSteps: 5, instructions: 'Be brief.' });
    expect(stored.body.agent.mcpServers).toEqual([{ kind: 'internal', name: 'ask_user_question' }]);
    expect(stored.body.agent.clientTools[0].name).toBe('get_weather');
    await page.getByLabel('Description', { exact: true }).fill('Answers questions');
    await page.getByRole('button', { name: 'Save changes' }).click();
    await expect.poll(() => page.locator('output.ok').textContent(), WAIT).toContain('version 2');
    await snap('agent-editor');
  });

  it('chats: streamed text shows before the turn completes', async () => {
    await page.goto(url(`/console/agents/${agentId}/chat`));
    await page.getByLabel('Message', { exact: true }).waitFor(WAIT);
    expect(await page.title()).toMatch(/^Playground/);
    const turn = await send('The stream has begun\nsleep 3000\nand now it ends');
    sessionId = new URL(page.url()).searchParams.get('session') ?? '';
    expect(sessionId).not.toBe('');
    // The delta arrived while the message is still running: seen live, not from the final GET.
    await expect
      .poll(
        async () => ({
          status: await turn.getAttribute('data-status'),
          text: (await turn.locator('.reply').textContent()) ?? '',
        }),
        WAIT,
      )
      .toEqual({ status: 'running', text: 'The stream has begun' });
    await expect.poll(() => turn.getAttribute('data-status'), WAIT).toBe('completed');
    expect(await turn.locator('.reply').textContent()).toBe('The stream has begun\nand now it ends');
  });

  it('answers a question inline', async () => {
    const turn = await send('ask What is your name?\n---\nNice to meet you');
    const answer = turn.getByLabel('Your answer');
    await answer.waitFor(WAIT);
    expect(await turn.textContent()).toContain('What is your name?');
    await accessible('playground with a question');
    await snap('playground-question');
    await answer.fill('Ada');
    await turn.getByRole('button', { name: 'Answer' }).click();
    await expect.poll(() => turn.getAttribute('data-status'), WAIT).toBe('completed');
    expect(await turn.locator('.reply').textContent()).toContain('Nice to meet you');
    await expect.poll(() => turn.locator('.tool-call').first().textContent(), WAIT).toContain('Ada');
  });

  it('gets a client tool output from a form', async () => {
    const turn = await send('call get_weather {"city":"Paris"}');
    const output = turn.getByLabel('Output of get_weather');
    await output.waitFor(WAIT);
    expect(await turn.locator('pre').first().textContent()).toContain('"city":"Paris"');
    await output.fill('Sunny, 21 C');
    await turn.getByRole('button', { name: 'Submit output' }).click();
    await expect.poll(() => turn.getAttribute('data-status'), WAIT).toBe('completed');
    await expect.poll(() => turn.locator('.tool-call').first().textContent(), WAIT).toContain('Sunny, 21 C');
    await snap('playground');
  });

  it('interrupts a running turn', async () => {
    const turn = await send('sleep 30000');
    await expect.poll(() => turn.getAttribute('data-status'), WAIT).toBe('running');
    await page.getByRole('button', { name: 'Interrupt' }).click();
    await expect.poll(() => turn.getAttribute('data-status'), WAIT).toBe('cancelled');
  });

  it('reconciles from the message GETs after the stream drops', async () => {
    const connection = () => page.locator('[data-connection]').getAttribute('data-connection');
    await expect.poll(connection, WAIT).toBe('live');
    // The tab stays cut off from the stream until the test lets it back.
    await page.route('**/v1/sessions/*/stream', (route) => route.abort());
    // A restart ends every open stream (same port, same data).
    const port = new URL(server.url).port;
    await server.stop();
    await expect.poll(connection, WAIT).toBe('reconnecting');
    server = await startServerProcess({ ...serverEnv, PORT: port });
    // Sent by another client while this tab is cut off: the tab learns of it only by reconciling.
    const accepted = await api(
      'POST',
      `/v1/sessions/${sessionId}/messages`,
      { parts: [{ type: 'text', text: 'Written while you were away' }] },
      { 'idempotency-key': 'console-away' },
    );
    expect(accepted.status).toBe(202);
    const status = async () =>
      (await api('GET', `/v1/sessions/${sessionId}/messages/${accepted.body.id}`)).body.message.status;
    await expect.poll(status, WAIT).toBe('completed');
    await page.unroute('**/v1/sessions/*/stream');
    await expect.poll(connection, WAIT).toBe('live');
    const turn = page.locator(`li.turn[data-message-id="${accepted.body.id}"]`);
    await expect.poll(() => turn.getAttribute('data-status'), WAIT).toBe('completed');
    expect(await turn.locator('.reply').textContent()).toBe('Written while you were away');
    expect(await page.locator('[aria-live="polite"]').first().textContent()).toContain('reconnected');
  });

  it("opens a run's trace with its spans, at a URL that can be shared", async () => {
    const questionTurn = page.locator('li.turn').nth(1);
    await questionTurn.getByRole('link', { name: 'Trace' }).click();
    await page.locator('[data-span-kind="tool_call"]').first().waitFor(WAIT);
    const path = new URL(page.url()).pathname;
    expect(path).toMatch(/^\/console\/runs\/[0-9a-f-]{36}$/);
    expect(await page.title()).toMatch(/^Run /);
    expect(await page.locator('[data-span-kind="agent_step"]').count()).toBe(2);
    expect(await page.locator('[data-span-kind="model_call"]').count()).toBe(2);
    const tool = page.locator('[data-span-kind="tool_call"]').first();
    expect(await tool.locator('.span-name').textContent()).toBe('ask_user_question');
    await tool.locator('summary').click();
    expect(await tool.locator('.span-body').textContent()).toContain('Ada');
    await accessible('trace');
    await snap('trace');

    // Another tab has no key (session storage is per tab): it signs in and lands on the shared trace.
    const shared = await context.newPage();
    watch(shared);
    await shared.goto(url(path));
    await shared.getByLabel('API key').fill(key);
    await shared.getByRole('button', { name: 'Sign in' }).click();
    await shared.locator('[data-span-kind="tool_call"]').first().waitFor(WAIT);
    expect(new URL(shared.url()).pathname).toBe(path);
    expect(await shared.locator('[data-span-kind]').count()).toBe(5);
    await shared.close();
  });

  it('lists runs with filters and cursor paging', async () => {
    await page.goto(url(`/console/runs?agent=${agentId}`));
    await page.getByRole('heading', { name: 'Runs', level: 1 }).waitFor(WAIT);
    await expect.poll(() => page.locator('tbody tr').count(), WAIT).toBe(5);
    await page.getByLabel('Status').selectOption('cancelled');
    await expect.poll(() => page.locator('tbody tr').count(), WAIT).toBe(1);
    expect(new URL(page.url()).searchParams.get('status')).toBe('cancelled');
    await page.getByLabel('Status').selectOption('');
    await page.getByLabel('Conversation').fill(`conv_${sessionId}`);
    await expect.poll(() => page.locator('tbody tr').count(), WAIT).toBe(5);
    await accessible('runs');
    await snap('runs');
    for (let batch = 0; batch < 51; batch += 17) {
      await Promise.all(
        Array.from({ length: 17 }, (_, i) => api('POST', '/v1/responses', { model: agentId, input: `r${batch + i}` })),
      );
    }
    await page.goto(url('/console/runs'));
    await expect.poll(() => page.locator('tbody tr').count(), WAIT).toBe(50);
    await page.getByRole('button', { name: 'Older' }).click();
    await expect.poll(() => page.locator('tbody tr').count(), WAIT).toBe(6);
    expect(new URL(page.url()).searchParams.get('cursor')).not.toBeNull();
  });

  it('creates a webhook endpoint (secret shown once), sends a test, and shows deliveries', async () => {
    await page.goto(url('/console/webhooks'));
    await page.getByRole('button', { name: 'New endpoint' }).click();
    await page.getByLabel('Endpoint name').fill('receiver');
    await page.getByLabel('Endpoint URL').fill('ftp://nowhere');
    await page.getByRole('checkbox', { name: /agent\.session\.idle/ }).check();
    await page.getByRole('button', { name: 'Create endpoint' }).click();
    await expect.poll(() => page.getByLabel('Endpoint URL').getAttribute('aria-invalid'), WAIT).toBe('true');
    await page.getByLabel('Endpoint URL').fill(`${receiver.url}/hooks`);
    await page.getByRole('button', { name: 'Create endpoint' }).click();
    const secret = page.locator('[data-secret]');
    await secret.waitFor(WAIT);
    expect(await secret.textContent()).toMatch(/^whsec_/);
    await accessible('webhooks');
    await snap('webhooks');
    await page.getByRole('link', { name: 'receiver' }).first().click();
    await page.getByRole('button', { name: 'Send test' }).waitFor(WAIT);
    expect(await page.title()).toMatch(/^Webhook receiver/);
    await page.getByRole('button', { name: 'Send test' }).click();
    await expect.poll(() => page.getByRole('status').first().textContent(), WAIT).toContain('HTTP 200');
    await receiver.waitFor((received) => received.length >= 1);

    // A real event: a turn that completes makes the session idle.
    await api(
      'POST',
      `/v1/sessions/${sessionId}/messages`,
      { parts: [{ type: 'text', text: 'ping' }] },
      { 'idempotency-key': 'console-hook' },
    );
    await receiver.waitFor((received) => received.some((request) => request.body.includes(sessionId)), 15_000);
    await expect.poll(() => page.locator('tbody tr').count(), WAIT).toBeGreaterThanOrEqual(2);
    const real = page.locator('tbody tr', { hasText: 'agent.session.idle' }).first();
    await expect.poll(() => real.textContent(), WAIT).toContain('delivered');
    const before = receiver.received.length;
    await real.getByRole('button', { name: /^Redeliver/ }).click();
    await receiver.waitFor((received) => received.length > before);
    await accessible('webhook endpoint');
    await snap('webhook');

    const hint = await page.locator('[data-secret-hint]').textContent();
    await page.getByRole('button', { name: 'Rotate secret' }).click();
    await expect.poll(() => page.locator('[data-secret]').textContent(), WAIT).toMatch(/^whsec_/);
    await expect.poll(() => page.locator('[data-secret-hint]').textContent(), WAIT).not.toBe(hint);
    await page.getByLabel('Endpoint name').fill('renamed');
    await page.getByRole('button', { name: 'Save endpoint' }).click();
    await expect.poll(() => page.locator('h1').textContent(), WAIT).toBe('Webhook renamed');
  });

  it('explains why an agent with sessions cannot be deleted', async () => {
    await page.goto(url(`/console/agents/${agentId}`));
    await page.getByRole('button', { name: 'Delete agent' }).click();
    await page.getByRole('button', { name: 'Confirm delete' }).click();
    const alert = page.locator('.danger-zone [role="alert"]');
    await expect.poll(() => alert.textContent(), WAIT).toContain('agent_in_use');
    expect(await alert.textContent()).toContain('Delete those sessions first');
    expect((await api('GET', `/v1/agents/${agentId}`)).status).toBe(200);
  });

  it("shows on the agent's page the tools it configures that this deployment cannot run", async () => {
    const created = await api('POST', '/v1/agents', {
      name: 'Overreaching',
      mcpServers: [
        { kind: 'internal', name: 'coding_agent' },
        { kind: 'internal', name: 'github' },
      ],
    });
    expect(created.status).toBe(201);
    await page.goto(url(`/console/agents/${created.body.agent.id}`));
    const notes = page.locator('.note.warning');
    await expect
      .poll(() => notes.allTextContents(), WAIT)
      .toEqual(
        ['coding_agent', 'github'].map(
          (name) =>
            `internal tool "${name}" is configured on the agent but this deployment cannot run it; the turn runs without it (tool_unavailable)`,
        ),
      );
    await page.goto(url(`/console/agents/${agentId}`));
    await page.getByRole('heading', { name: 'Helper', level: 1 }).waitFor(WAIT);
    expect(await notes.count()).toBe(0);
  });

  it('uploads and lists files, and shows usage and connectors', async () => {
    await page.goto(url('/console/files'));
    await page.getByLabel('File', { exact: true }).setInputFiles({
      name: 'notes.md',
      mimeType: 'text/markdown',
      buffer: Buffer.from('# Notes\n'),
    });
    await page.getByRole('button', { name: 'Upload' }).click();
    await expect.poll(() => page.locator('tbody').textContent(), WAIT).toContain('notes.md');
    await accessible('files');
    await snap('files');

    await page.goto(url('/console/usage'));
    await page.getByRole('img', { name: /Daily cost per agent/ }).waitFor(WAIT);
    expect(await page.locator('.big').textContent()).toBe('Unlimited');
    expect(await page.locator('tbody').textContent()).toContain('Helper');
    await accessible('usage');
    await snap('usage');

    await page.goto(url('/console/connectors'));
    await page.getByRole('heading', { name: 'Connectors', level: 1 }).waitFor(WAIT);
    await accessible('connectors');

    await page.goto(url('/console/sessions'));
    await page.locator('tbody tr').first().waitFor(WAIT);
    await accessible('sessions');
    await snap('sessions');
    await page.goto(url(`/console/sessions/${sessionId}`));
    await page.locator('li.turn').first().waitFor(WAIT);
    expect(await page.title()).toMatch(/^Session/);
    await accessible('session');
  });

  it('follows the system dark theme', async () => {
    const dark = await browser.newContext({ viewport: { width: 1200, height: 760 }, colorScheme: 'dark' });
    const night = await dark.newPage();
    watch(night);
    await night.goto(url('/console/sign-in'));
    await night.getByLabel('API key').fill(key);
    await night.getByRole('button', { name: 'Sign in' }).click();
    // Signed in once the console shows its first page: navigating earlier can land back on the sign-in page.
    await night.getByRole('heading', { name: 'Agents', level: 1 }).waitFor(WAIT);
    await night.goto(url(`/console/agents/${agentId}/chat?session=${sessionId}`));
    await night.locator('li.turn').first().waitFor(WAIT);
    const background = await night.evaluate('getComputedStyle(document.documentElement).backgroundColor');
    expect(background).toBe('rgb(21, 23, 28)');
    await accessible('playground, dark', night);
    await snap('playground-dark', night);
    await dark.close();
  });

  it('approves and denies a tool call from the playground, showing its tool, server and arguments', async () => {
    const created = await api('POST', '/v1/agents', {
      name: 'careful',
      mcpServers: [{ kind: 'internal', name: 'http_client' }],
      toolApprovals: { default: 'always_ask', overrides: {} },
    });
    expect(created.status).toBe(201);
    await page.goto(url(`/console/agents/${created.body.agent.id}/chat`));
    await page.getByLabel('Message', { exact: true }).waitFor(WAIT);

    const denied = await send('call http_request {"method":"POST","url":"https://example.com/orders"}');
    const form = denied.locator('form.approval');
    await form.waitFor(WAIT);
    expect(await denied.getAttribute('data-status')).toBe('requires_action');
    const shown = (await form.textContent()) ?? '';
    expect(shown).toContain('http_request');
    expect(shown).toContain('agentry');
    expect(await form.locator('pre').textContent()).toBe('{"method":"POST","url":"https://example.com/orders"}');
    await accessible('playground with a tool approval');
    await snap('playground-approval');
    await form.getByLabel('Reason (optional)').fill('not from the console');
    await form.getByRole('button', { name: 'Deny' }).click();
    await expect.poll(() => denied.getAttribute('data-status'), WAIT).toBe('completed');
    expect(await denied.locator('.reply').textContent()).toContain('Reason: not from the console');

    const approved = await send('call http_request {"method":"DELETE","url":"https://example.com/orders/1"}');
    await approved.locator('form.approval').waitFor(WAIT);
    await approved.getByRole('button', { name: 'Approve' }).click();
    await expect.poll(() => approved.getAttribute('data-status'), WAIT).toBe('completed');
    // It ran (once): the network policy refused the request, which is what the model read.
    expect(await approved.locator('.reply').textContent()).toContain('refused');
  });

  it('ran every page without script errors or CSP refusals', () => {
    expect(problems).toEqual([]);
  });
});
