/**
 * The web console in a real browser (Debian's Chromium through playwright-core) against a real Agentry process
 * with the scripted model: sign in, create an agent after fixing a validation error, chat with streamed text seen
 * before the turn completes, answer a question, submit a client tool's output, approve and deny a tool call,
 * interrupt, reconnect after a dropped stream, read a run's trace, create a webhook endpoint and see its
 * deliveries, files and usage. Every main page passes axe-core without serious or critical violations, under the
 * strict CSP, which no page breaks.
 *
 * Every test stands alone: a browser context of its own, its own sign-in, and the agents and sessions it reads made
 * through the API; script errors and CSP refusals fail the test whose page had them. Nothing here asserts speed
 * (bench/console.ts measures how fast the sign-in page paints); waits are for conditions, with generous deadlines.
 * With AGENTRY_CONSOLE_SCREENSHOTS=<dir> it also saves a screenshot of each page (docs/console/ holds them).
 */
import { randomUUID } from 'node:crypto';
import { mkdirSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { gzipSync } from 'node:zlib';
import type { Browser, BrowserContext, BrowserContextOptions, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CONSOLE_DIR, ensureConsoleBuilt } from '../scripts/console-build.ts';
import { chromiumAvailable, launchChromium, paintTimings, seriousViolations } from './helpers/browser.ts';
import { WAIT_MS } from './helpers/deadlines.ts';
import {
  ASK_USER_QUESTION_SERVER,
  httpClient,
  type Json,
  textParts,
  WEATHER_TOOL,
  waitUntil,
} from './helpers/fixtures.ts';
import { testKey } from './helpers/harness.ts';
import { runCli, type ServerProcess, startServerProcess, startsTimeout } from './helpers/server-process.ts';
import { type Receiver, startReceiver } from './helpers/webhook-receiver.ts';

const SCREENSHOTS = process.env.AGENTRY_CONSOLE_SCREENSHOTS ?? null;
const INITIAL_JS_BUDGET = 250 * 1024;
/** For expect.poll, whose own deadline (1 s) a loaded machine misses. */
const WAIT = { timeout: WAIT_MS };
const VIEWPORT = { width: 1200, height: 760 };

const available = chromiumAvailable();
if (!available && process.env.CI === 'true') throw new Error('the console tests need /usr/bin/chromium under CI');
if (!available)
  process.stdout.write('\n[agentry] NOTICE: console browser tests SKIPPED: /usr/bin/chromium is missing\n\n');

const key = testKey();
let receiver: Receiver;
let browser: Browser;

/** An Agentry process with its own data, and the API as a client with the admin key sees it. */
interface ConsoleServer {
  url: string;
  dataDir: string;
  api: ReturnType<typeof httpClient>;
  process: () => ServerProcess;
  /** Stops the process and starts it again on the same port, with the same data. */
  restart(): Promise<void>;
  close(): Promise<void>;
}

async function startConsoleServer(): Promise<ConsoleServer> {
  const dataDir = mkdtempSync(join(tmpdir(), 'agentry-console-'));
  const env = {
    AGENTRY_DATA_DIR: dataDir,
    AGENTRY_BOOTSTRAP_KEY: key,
    AGENTRY_ALLOW_INSECURE_DESTINATIONS: 'true',
    AGENTRY_WEBHOOK_RETRY_BASE_MS: '200',
    AGENTRY_POLL_MS: '200',
  };
  let server: ServerProcess | null = null;
  try {
    server = await startServerProcess(env);
  } finally {
    if (server === null) rmSync(dataDir, { recursive: true, force: true });
  }
  let current = server;
  return {
    url: current.url,
    dataDir,
    api: httpClient(current.url, key),
    process: () => current,
    async restart() {
      await current.stop();
      current = await startServerProcess({ ...env, PORT: new URL(current.url).port });
    },
    async close() {
      await current.stop();
      rmSync(dataDir, { recursive: true, force: true });
    },
  };
}

/** The server every test but one shares (that one restarts its own). */
let shared: ConsoleServer;
const url = (path: string) => `${shared.url}${path}`;

/** Watches a page for script errors and CSP refusals: the console must run clean under its policy. */
function watch(target: Page, problems: string[]): void {
  target.on('pageerror', (error) => problems.push(`page error: ${error.message}`));
  target.on('console', (message) => {
    const text = message.text();
    if (/Content.Security.Policy|Refused to/i.test(text)) problems.push(`CSP: ${text}`);
    else if (message.type() === 'error' && !/Failed to load resource/.test(text)) problems.push(`console: ${text}`);
  });
}

async function snap(page: Page, name: string): Promise<void> {
  if (SCREENSHOTS === null) return;
  mkdirSync(SCREENSHOTS, { recursive: true });
  await page.screenshot({ path: join(SCREENSHOTS, `${name}.png`) });
}

async function accessible(page: Page, what: string): Promise<void> {
  expect(await seriousViolations(page), `${what}: serious or critical accessibility violations`).toEqual([]);
}

/** Signs in through the sign-in page, as a user does; signed in once the console shows its first page. */
async function signIn(page: Page, base: string, apiKey = key): Promise<void> {
  await page.goto(`${base}/console/sign-in`);
  await page.getByLabel('API key').fill(apiKey);
  await page.getByRole('button', { name: 'Sign in' }).click();
  await page.getByRole('heading', { name: 'Agents', level: 1 }).waitFor();
}

/** Sends a message from the playground; returns its turn once it is listed. */
async function send(page: Page, text: string) {
  const before = await page.locator('li.turn').count();
  await page.getByLabel('Message', { exact: true }).fill(text);
  await page.getByRole('button', { name: 'Send', exact: true }).click();
  await expect.poll(() => page.locator('li.turn').count(), WAIT).toBe(before + 1);
  return page.locator('li.turn').last();
}

async function createAgent(fields: Json, api = shared.api): Promise<string> {
  const created = await api('POST', '/v1/agents', fields);
  expect(created.status, JSON.stringify(created.body)).toBe(201);
  return created.body.agent.id;
}

async function createSession(agentId: string, api = shared.api): Promise<string> {
  const created = await api('POST', '/v1/sessions', { agentId });
  expect(created.status, JSON.stringify(created.body)).toBe(201);
  return created.body.session.id;
}

async function postMessage(sessionId: string, text: string, api = shared.api): Promise<string> {
  const posted = await api('POST', `/v1/sessions/${sessionId}/messages`, textParts(text), {
    'idempotency-key': randomUUID(),
  });
  expect(posted.status, JSON.stringify(posted.body)).toBe(202);
  return posted.body.id;
}

async function messageIn(sessionId: string, messageId: string, statuses: string[], api = shared.api): Promise<Json> {
  return waitUntil(
    async () => {
      const message = (await api('GET', `/v1/sessions/${sessionId}/messages/${messageId}`)).body?.message;
      return statuses.includes(message?.status) ? message : null;
    },
    { what: `message ${messageId} to be ${statuses.join(' or ')}` },
  );
}

/** An agent named `name` with one session and one completed turn in it. */
async function agentWithTurn(name: string): Promise<{ agentId: string; sessionId: string }> {
  const agentId = await createAgent({ name });
  const sessionId = await createSession(agentId);
  await messageIn(sessionId, await postMessage(sessionId, 'Hello there'), ['completed']);
  return { agentId, sessionId };
}

interface ConsoleFixtures {
  /**
   * Opens a page in a browser context of its own (so its own session storage), light and at the screenshots' size.
   * A script error or CSP refusal on any page of the test fails the test.
   */
  newPage: (options?: BrowserContextOptions) => Promise<Page>;
  /** A page of its own, signed in with the admin key on the shared server, showing the Agents page. */
  page: Page;
}

const test = it.extend<ConsoleFixtures>({
  // biome-ignore lint/correctness/noEmptyPattern: Vitest reads a fixture's dependencies from this pattern.
  newPage: async ({}, use) => {
    const problems: string[] = [];
    const contexts: BrowserContext[] = [];
    await use(async (options = {}) => {
      const context = await browser.newContext({ viewport: VIEWPORT, colorScheme: 'light', ...options });
      contexts.push(context);
      // Every action and navigation waits for its condition as long as the helpers' waits do.
      context.setDefaultTimeout(WAIT_MS);
      context.on('page', (page) => watch(page, problems));
      return context.newPage();
    });
    await Promise.all(contexts.map((context) => context.close()));
    expect(problems, 'script errors or CSP refusals').toEqual([]);
  },
  page: async ({ newPage }, use) => {
    const page = await newPage();
    await signIn(page, shared.url);
    await use(page);
  },
});

describe.skipIf(!available)('web console', () => {
  beforeAll(async () => {
    ensureConsoleBuilt();
    [receiver, shared, browser] = await Promise.all([startReceiver(), startConsoleServer(), launchChromium()]);
  });

  afterAll(async () => {
    await browser?.close();
    await shared?.close();
    await receiver?.close();
  });

  test('is served at /console with a strict CSP, / redirects there, hashed assets are cached for good', async () => {
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
    // (The older API under /api/sdk is API, and so are the metadata documents under /.well-known.)
    const pages = Object.keys(document.paths).filter(
      (path) =>
        !path.startsWith('/v1/') &&
        !path.startsWith('/api/sdk/') &&
        !path.startsWith('/.well-known/') &&
        !path.endsWith('z'),
    );
    expect(pages).toEqual([]);
    expect(shared.process().output()).toContain(`web console: ${shared.url}/console/`);
  });

  test('keeps the initial JavaScript under 250 KB gzipped', () => {
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

  test('signs in with an API key kept in session storage', async ({ newPage }) => {
    const page = await newPage();
    await page.goto(url('/console/agents'));
    await page.getByLabel('API key').waitFor();
    expect(page.url()).toContain('/console/sign-in');
    expect(await page.title()).toMatch(/^Sign in/);
    // Printed, not checked: how fast a page paints is the machine's as much as the console's (bench/console.ts).
    await expect.poll(async () => (await paintTimings(page)).fcp, WAIT).not.toBeNull();
    const { fcp, lcp } = await paintTimings(page);
    process.stdout.write(`[console] sign-in page: first contentful paint ${fcp} ms, largest ${lcp} ms\n`);
    await accessible(page, 'sign-in');
    await snap(page, 'sign-in');

    await page.getByLabel('API key').fill('agk_wrongwrongwrongwrongwrongwrongwrongwrong');
    await page.getByRole('button', { name: 'Sign in' }).click();
    await expect.poll(() => page.getByRole('alert').first().textContent(), WAIT).toContain('invalid_api_key');

    // Keyboard only: the field, then Enter.
    await page.getByLabel('API key').fill(key);
    await page.getByLabel('API key').press('Enter');
    await page.getByRole('heading', { name: 'Agents', level: 1 }).waitFor();
    expect(new URL(page.url()).pathname).toBe('/console/agents');
    expect(await page.title()).toMatch(/^Agents/);
    await expect.poll(() => page.locator('.who').textContent(), WAIT).toContain('default');
    expect(await page.locator('.who').textContent()).toContain('webhooks:write');
    // Page expressions are text: this Node.js project does not load the DOM's types.
    expect(await page.evaluate("sessionStorage.getItem('agentry.apiKey')")).toBe(key);
    expect(await page.evaluate('document.cookie')).toBe('');
    expect(await page.evaluate('localStorage.length')).toBe(0);
    expect(page.url()).not.toContain(key);
    await accessible(page, 'agents');
    await snap(page, 'agents');
  });

  test('hides what a read-only key cannot do', async ({ newPage }) => {
    const created = runCli(['keys', 'create', '--org', 'default', '--scopes', 'tasks:read'], {
      AGENTRY_DATA_DIR: shared.dataDir,
    });
    expect(created.status, created.stderr).toBe(0);
    const reader = await newPage();
    await signIn(reader, shared.url, created.stdout.trim());
    await expect.poll(() => reader.locator('.who').textContent(), WAIT).toContain('tasks:read');
    expect(await reader.getByRole('link', { name: 'New agent' }).count()).toBe(0);
    expect(await reader.getByRole('link', { name: 'Webhooks' }).count()).toBe(0);
    expect(await reader.getByRole('link', { name: 'Files' }).count()).toBe(0);
    expect(await reader.getByRole('link', { name: 'Runs' }).count()).toBeGreaterThan(0);
  });

  test('creates an agent, showing the validation error beside its field until it is fixed', async ({ page }) => {
    await page.getByRole('link', { name: 'New agent' }).click();
    await page.getByLabel('Name', { exact: true }).waitFor();
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
    await accessible(page, 'agent editor');
    await page.getByRole('button', { name: 'Create agent' }).click();
    const maxSteps = page.getByLabel('Max steps');
    await expect.poll(() => maxSteps.getAttribute('aria-invalid'), WAIT).toBe('true');
    const described = (await maxSteps.getAttribute('aria-describedby')) ?? '';
    const errorId = described.split(' ').find((id) => id.endsWith('-error')) ?? '';
    expect(await page.locator(`[id="${errorId}"]`).textContent()).toBe('Max steps must be at most 128');
    // Focus moves to the field in error.
    const fieldId = await maxSteps.getAttribute('id');
    await expect.poll(() => page.evaluate('document.activeElement?.id'), WAIT).toBe(fieldId);
    await snap(page, 'agent-editor-error');
    expect(new URL(page.url()).pathname).toBe('/console/agents/new');

    await maxSteps.fill('5');
    await page.getByRole('button', { name: 'Create agent' }).click();
    await page.getByRole('heading', { name: 'Helper', level: 1 }).waitFor();
    const agentId = /\/console\/agents\/([0-9a-f-]{36})$/.exec(new URL(page.url()).pathname)?.[1] ?? '';
    expect(agentId).not.toBe('');
    const stored = await shared.api('GET', `/v1/agents/${agentId}`);
    expect(stored.body.agent).toMatchObject({ name: 'Helper', maxSteps: 5, instructions: 'Be brief.' });
    expect(stored.body.agent.mcpServers).toEqual([{ kind: 'internal', name: 'ask_user_question' }]);
    expect(stored.body.agent.clientTools[0].name).toBe('get_weather');
    // The page names the agent's A2A Agent Card, and that URL answers the card.
    const cardUrl = `${new URL(page.url()).origin}/v1/agents/${agentId}/.well-known/agent-card.json`;
    expect(await page.getByTestId('agent-card-url').textContent()).toBe(cardUrl);
    const card = await shared.api('GET', new URL(cardUrl).pathname);
    expect(card.body).toMatchObject({ name: 'Helper' });
    await page.getByLabel('Description', { exact: true }).fill('Answers questions');
    await page.getByRole('button', { name: 'Save changes' }).click();
    await expect.poll(() => page.locator('output.ok').textContent(), WAIT).toContain('version 2');
    await snap(page, 'agent-editor');
  });

  test('chats: streamed text shows before the turn completes', async ({ page }) => {
    const agentId = await createAgent({ name: 'Chatty' });
    await page.goto(url(`/console/agents/${agentId}/chat`));
    await page.getByLabel('Message', { exact: true }).waitFor();
    expect(await page.title()).toMatch(/^Playground/);
    // The pause gives the page time to show the first delta while the turn runs, even on a loaded machine.
    const turn = await send(page, 'The stream has begun\nsleep 6000\nand now it ends');
    expect(new URL(page.url()).searchParams.get('session')).toMatch(/^[0-9a-f-]{36}$/);
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

  test('answers a question inline', async ({ page }) => {
    const agentId = await createAgent({ name: 'Curious', mcpServers: [ASK_USER_QUESTION_SERVER] });
    await page.goto(url(`/console/agents/${agentId}/chat`));
    const turn = await send(page, 'ask What is your name?\n---\nNice to meet you');
    const answer = turn.getByLabel('Your answer');
    await answer.waitFor();
    expect(await turn.textContent()).toContain('What is your name?');
    await accessible(page, 'playground with a question');
    await snap(page, 'playground-question');
    // The session list beside the chat follows the stream: waiting for the answer, then idle once it completed.
    const listed = page.getByRole('complementary', { name: 'Sessions of this agent' }).locator('[data-session-status]');
    await expect.poll(() => listed.first().getAttribute('data-session-status'), WAIT).toBe('requires_action');
    expect(await page.getByRole('complementary').getByRole('link').first().textContent()).toContain('ask What is');
    await answer.fill('Ada');
    await turn.getByRole('button', { name: 'Answer' }).click();
    await expect.poll(() => turn.getAttribute('data-status'), WAIT).toBe('completed');
    await expect.poll(() => listed.first().getAttribute('data-session-status'), WAIT).toBe('idle');
    expect(await turn.locator('.reply').textContent()).toContain('Nice to meet you');
    await expect.poll(() => turn.locator('.tool-call').first().textContent(), WAIT).toContain('Ada');
  });

  test('gets a client tool output from a form', async ({ page }) => {
    const agentId = await createAgent({ name: 'Forecaster', clientTools: [WEATHER_TOOL] });
    await page.goto(url(`/console/agents/${agentId}/chat`));
    const turn = await send(page, 'call get_weather {"city":"Paris"}');
    const output = turn.getByLabel('Output of get_weather');
    await output.waitFor();
    expect(await turn.locator('pre').first().textContent()).toContain('"city":"Paris"');
    await output.fill('Sunny, 21 C');
    await turn.getByRole('button', { name: 'Submit output' }).click();
    await expect.poll(() => turn.getAttribute('data-status'), WAIT).toBe('completed');
    await expect.poll(() => turn.locator('.tool-call').first().textContent(), WAIT).toContain('Sunny, 21 C');
    await snap(page, 'playground');
  });

  test('interrupts a running turn', async ({ page }) => {
    const agentId = await createAgent({ name: 'Sleepy' });
    await page.goto(url(`/console/agents/${agentId}/chat`));
    const turn = await send(page, 'sleep 120000');
    await expect.poll(() => turn.getAttribute('data-status'), WAIT).toBe('running');
    await page.getByRole('button', { name: 'Interrupt' }).click();
    // It asks first, saying what happens.
    expect(await page.getByRole('group', { name: 'Interrupt' }).textContent()).toContain('ends cancelled');
    await page.getByRole('button', { name: 'Confirm interrupt' }).click();
    await expect.poll(() => turn.getAttribute('data-status'), WAIT).toBe('cancelled');
    // "Interrupting…" is gone once the turn has ended.
    await expect.poll(() => page.getByText('Interrupting…').count(), WAIT).toBe(0);
    expect(await page.getByRole('button', { name: 'Interrupt' }).isDisabled()).toBe(true);
  });

  // On a server of its own, which it restarts.
  test(
    'reconciles from the message GETs after the stream drops',
    async ({ newPage }) => {
      const own = await startConsoleServer();
      try {
        const agentId = await createAgent({ name: 'Reconnecting' }, own.api);
        const page = await newPage();
        await signIn(page, own.url);
        await page.goto(`${own.url}/console/agents/${agentId}/chat`);
        const first = await send(page, 'Before the drop');
        await expect.poll(() => first.getAttribute('data-status'), WAIT).toBe('completed');
        const sessionId = new URL(page.url()).searchParams.get('session') ?? '';
        const connection = () => page.locator('[data-connection]').getAttribute('data-connection');
        await expect.poll(connection, WAIT).toBe('live');
        // The tab stays cut off from the stream until the test lets it back.
        await page.route('**/v1/sessions/*/stream', (route) => route.abort());
        // A restart ends every open stream (same port, same data).
        const restarted = own.restart();
        await expect.poll(connection, WAIT).toBe('reconnecting');
        await restarted;
        // Sent by another client while this tab is cut off: the tab learns of it only by reconciling.
        const awayId = await postMessage(sessionId, 'Written while you were away', own.api);
        await messageIn(sessionId, awayId, ['completed'], own.api);
        await page.unroute('**/v1/sessions/*/stream');
        await expect.poll(connection, WAIT).toBe('live');
        const turn = page.locator(`li.turn[data-message-id="${awayId}"]`);
        await expect.poll(() => turn.getAttribute('data-status'), WAIT).toBe('completed');
        expect(await turn.locator('.reply').textContent()).toBe('Written while you were away');
        expect(await page.locator('[aria-live="polite"]').first().textContent()).toContain('reconnected');
      } finally {
        await own.close();
      }
    },
    startsTimeout(2),
  );

  test("opens a run's trace with its spans, at a URL that can be shared", async ({ page }) => {
    const agentId = await createAgent({ name: 'Asker', mcpServers: [ASK_USER_QUESTION_SERVER] });
    const sessionId = await createSession(agentId);
    const messageId = await postMessage(sessionId, 'ask What is your name?\n---\nNice to meet you');
    await messageIn(sessionId, messageId, ['requires_action']);
    const answered = await shared.api('POST', `/v1/sessions/${sessionId}/messages/${messageId}/answer`, {
      actionId: 0,
      answer: 'Ada',
    });
    expect(answered.status, JSON.stringify(answered.body)).toBe(200);
    await messageIn(sessionId, messageId, ['completed']);
    await page.goto(url(`/console/agents/${agentId}/chat?session=${sessionId}`));
    await page.locator(`li.turn[data-message-id="${messageId}"]`).getByRole('link', { name: 'Trace' }).click();
    await page.locator('[data-span-kind="tool_call"]').first().waitFor();
    const path = new URL(page.url()).pathname;
    expect(path).toMatch(/^\/console\/runs\/[0-9a-f-]{36}$/);
    expect(await page.title()).toMatch(/^Run /);
    expect(await page.locator('[data-span-kind="agent_step"]').count()).toBe(2);
    expect(await page.locator('[data-span-kind="model_call"]').count()).toBe(2);
    const tool = page.locator('[data-span-kind="tool_call"]').first();
    expect(await tool.locator('.span-name').textContent()).toBe('ask_user_question');
    await tool.locator('summary').click();
    expect(await tool.locator('.span-body').textContent()).toContain('Ada');
    await accessible(page, 'trace');
    await snap(page, 'trace');

    // Another tab has no key (session storage is per tab): it signs in and lands on the shared trace.
    const other = await page.context().newPage();
    await other.goto(url(path));
    await other.getByLabel('API key').fill(key);
    await other.getByRole('button', { name: 'Sign in' }).click();
    await other.locator('[data-span-kind="tool_call"]').first().waitFor();
    expect(new URL(other.url()).pathname).toBe(path);
    expect(await other.locator('[data-span-kind]').count()).toBe(5);
  });

  test('lists runs with filters and cursor paging', async ({ page }) => {
    const agentId = await createAgent({ name: 'Busy' });
    // 49 runs through the Responses API, then a session's two: one completed, one cancelled (the newest).
    for (let batch = 0; batch < 49; batch += 7) {
      const answers = await Promise.all(
        Array.from({ length: 7 }, (_, i) =>
          shared.api('POST', '/v1/responses', { model: agentId, input: `r${batch + i}` }),
        ),
      );
      expect(answers.map((answer) => answer.status)).toEqual(Array(7).fill(200));
    }
    const sessionId = await createSession(agentId);
    await messageIn(sessionId, await postMessage(sessionId, 'hello'), ['completed']);
    const sleeping = await postMessage(sessionId, 'sleep 120000');
    await messageIn(sessionId, sleeping, ['running']);
    expect((await shared.api('POST', `/v1/sessions/${sessionId}/interrupt`)).status).toBe(200);
    await messageIn(sessionId, sleeping, ['cancelled']);

    await page.goto(url(`/console/runs?agent=${agentId}`));
    await page.getByRole('heading', { name: 'Runs', level: 1 }).waitFor();
    await expect.poll(() => page.locator('tbody tr').count(), WAIT).toBe(50);
    await page.getByLabel('Status').selectOption('cancelled');
    await expect.poll(() => page.locator('tbody tr').count(), WAIT).toBe(1);
    expect(new URL(page.url()).searchParams.get('status')).toBe('cancelled');
    await page.getByLabel('Status').selectOption('');
    await page.getByLabel('Conversation').fill(`conv_${sessionId}`);
    await expect.poll(() => page.locator('tbody tr').count(), WAIT).toBe(2);
    await accessible(page, 'runs');
    await snap(page, 'runs');
    await page.getByLabel('Conversation').fill('');
    await expect.poll(() => page.locator('tbody tr').count(), WAIT).toBe(50);
    // Both changes in one task of the page, before it renders again: the second keeps the first.
    await page.getByLabel('Status').selectOption('cancelled');
    await expect.poll(() => page.locator('tbody tr').count(), WAIT).toBe(1);
    const statusId = await page.getByLabel('Status').getAttribute('id');
    const conversationId = await page.getByLabel('Conversation').getAttribute('id');
    await page.evaluate(`(() => {
      const set = (element, value, type) => {
        const proto = Object.getPrototypeOf(element);
        Object.getOwnPropertyDescriptor(proto, 'value').set.call(element, value);
        element.dispatchEvent(new Event(type, { bubbles: true }));
      };
      set(document.getElementById(${JSON.stringify(statusId)}), '', 'change');
      set(document.getElementById(${JSON.stringify(conversationId)}), ${JSON.stringify(`conv_${sessionId}`)}, 'input');
    })()`);
    await expect.poll(() => page.locator('tbody tr').count(), WAIT).toBe(2);
    expect(new URL(page.url()).searchParams.get('status')).toBeNull();
    await page.getByLabel('Conversation').fill('');
    await expect.poll(() => page.locator('tbody tr').count(), WAIT).toBe(50);
    // Each row leads with its input and says how long the run took.
    const newest = page.locator('tbody tr').nth(1);
    expect(await newest.locator('td').first().textContent()).toBe('hello');
    expect(await newest.locator('td').nth(4).textContent()).toMatch(/^(< 1 s|\d+ s)$/);
    expect(await page.locator('.pager').first().textContent()).toContain('Page 1 · 50 runs');
    await page.getByRole('button', { name: 'Next' }).click();
    await expect.poll(() => page.locator('tbody tr').count(), WAIT).toBe(1);
    expect(new URL(page.url()).searchParams.get('cursor')).not.toBeNull();
    expect(await page.locator('.pager').first().textContent()).toContain('Page 2 · 1 runs');
    expect(await page.getByRole('button', { name: 'Next' }).isDisabled()).toBe(true);
    await page.getByRole('button', { name: 'Previous' }).click();
    await expect.poll(() => page.locator('tbody tr').count(), WAIT).toBe(50);
    expect(new URL(page.url()).searchParams.get('cursor')).toBeNull();
  });

  test('lists sessions by title or first message, with copyable ids that tell them apart, and renames one', async ({
    newPage,
  }) => {
    const page = await newPage({ permissions: ['clipboard-read', 'clipboard-write'] });
    await signIn(page, shared.url);
    const agentId = await createAgent({ name: 'Lister' });
    const titled = (await shared.api('POST', '/v1/sessions', { agentId, title: 'Quarterly plan' })).body.session.id;
    const first = await createSession(agentId);
    await messageIn(first, await postMessage(first, 'What do cats eat?'), ['completed']);
    await messageIn(first, await postMessage(first, 'And dogs?'), ['completed']);
    const failed = await createSession(agentId);
    await messageIn(failed, await postMessage(failed, 'Break please\nfail upstream exploded'), ['failed']);

    await page.goto(url(`/console/sessions?agent=${agentId}`));
    const rows = page.locator('tbody tr');
    await expect.poll(() => rows.count(), WAIT).toBe(3);
    const firstCells = async () => (await rows.locator('td:first-child').allTextContents()).map((t) => t.trim());
    await expect
      .poll(firstCells, WAIT)
      .toEqual(['Break please fail upstream exploded (untitled)', 'What do cats eat? (untitled)', 'Quarterly plan']);
    // Message counts, then ids: monospace, the random end of each UUIDv7 (not its shared time prefix), whole on hover.
    await expect.poll(() => rows.nth(1).locator('td').nth(3).textContent(), WAIT).toBe('2');
    const ids = await rows.locator('.id code').allTextContents();
    expect(ids).toEqual([failed, first, titled].map((id) => `…${id.slice(-8)}`));
    expect(await rows.nth(2).locator('.id code').getAttribute('title')).toBe(titled);
    // Times are relative, the date and time on hover.
    const time = rows.first().locator('time');
    expect(await time.textContent()).toMatch(/just now|minute/);
    expect(await time.getAttribute('title')).toMatch(/\d{4}/);
    await rows
      .nth(2)
      .getByRole('button', { name: `Copy session id ${titled}` })
      .click();
    await expect.poll(() => page.evaluate('navigator.clipboard.readText()'), WAIT).toBe(titled);
    expect(await page.locator('.pager').textContent()).toContain('1–3 of 3');
    // Status filter.
    await page.getByLabel('Status').selectOption('failed');
    await expect.poll(() => rows.count(), WAIT).toBe(1);
    expect(await rows.first().textContent()).toContain('failed');
    expect(new URL(page.url()).searchParams.get('status')).toBe('failed');
    await accessible(page, 'sessions');

    // Renamed on its page; the list then reads the new title.
    await page.goto(url(`/console/sessions/${first}`));
    await page.getByRole('heading', { name: 'What do cats eat?', level: 1 }).waitFor();
    await page.getByLabel('Title').fill('Pet food');
    await page.getByRole('button', { name: 'Rename' }).click();
    await page.getByRole('heading', { name: 'Pet food', level: 1 }).waitFor();
    expect((await shared.api('GET', `/v1/sessions/${first}`)).body.session.title).toBe('Pet food');
    await page.goto(url(`/console/sessions?agent=${agentId}`));
    await expect.poll(() => rows.nth(1).locator('td').first().textContent(), WAIT).toBe('Pet food');
  });

  test('creates a webhook endpoint (secret shown once), sends a test, and shows deliveries', async ({ page }) => {
    const agentId = await createAgent({ name: 'Announcer' });
    const sessionId = await createSession(agentId);
    const before = receiver.received.length;
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
    await secret.waitFor();
    expect(await secret.textContent()).toMatch(/^whsec_/);
    await accessible(page, 'webhooks');
    await snap(page, 'webhooks');
    await page.getByRole('link', { name: 'receiver' }).first().click();
    await page.getByRole('button', { name: 'Send test' }).waitFor();
    expect(await page.title()).toMatch(/^Webhook receiver/);
    await page.getByRole('button', { name: 'Send test' }).click();
    await expect.poll(() => page.getByRole('status').first().textContent(), WAIT).toContain('HTTP 200');
    await receiver.waitFor((received) => received.length > before, 'the test delivery');

    // A real event: a turn that completes makes the session idle.
    await postMessage(sessionId, 'ping');
    await receiver.waitFor(
      (received) => received.some((request) => request.body.includes(sessionId)),
      "the session's agent.session.idle",
    );
    await expect.poll(() => page.locator('tbody tr').count(), WAIT).toBeGreaterThanOrEqual(2);
    const real = page.locator('tbody tr', { hasText: 'agent.session.idle' }).first();
    await expect.poll(() => real.textContent(), WAIT).toContain('delivered');
    const delivered = receiver.received.length;
    await real.getByRole('button', { name: /^Redeliver/ }).click();
    await receiver.waitFor((received) => received.length > delivered, 'the redelivery');
    await accessible(page, 'webhook endpoint');
    await snap(page, 'webhook');

    const hint = await page.locator('[data-secret-hint]').textContent();
    await page.getByRole('button', { name: 'Rotate secret' }).click();
    // Disruptive: it says what happens and waits for the confirmation.
    const asking = page.getByRole('group', { name: 'Rotate secret' });
    expect(await asking.textContent()).toContain('the current one stops working at once');
    expect(await page.locator('[data-secret-hint]').textContent()).toBe(hint);
    await page.getByRole('button', { name: 'Confirm rotate' }).click();
    await expect.poll(() => page.locator('[data-secret]').textContent(), WAIT).toMatch(/^whsec_/);
    await expect.poll(() => page.locator('[data-secret-hint]').textContent(), WAIT).not.toBe(hint);
    await page.getByLabel('Endpoint name').fill('renamed');
    await page.getByRole('button', { name: 'Save endpoint' }).click();
    await expect.poll(() => page.locator('h1').textContent(), WAIT).toBe('Webhook renamed');
  });

  test('explains why an agent with sessions cannot be deleted', async ({ page }) => {
    const agentId = await createAgent({ name: 'Kept' });
    await createSession(agentId);
    await page.goto(url(`/console/agents/${agentId}`));
    // The page names the agent's MCP address (docs/mcp-server.md), which answers an MCP client.
    const mcpUrl = url(`/v1/agents/${agentId}/mcp`);
    await expect.poll(() => page.getByTestId('agent-mcp-url').textContent(), WAIT).toBe(mcpUrl);
    const initialize = await fetch(mcpUrl, {
      method: 'POST',
      headers: {
        authorization: `Bearer ${key}`,
        'content-type': 'application/json',
        accept: 'application/json, text/event-stream',
      },
      body: JSON.stringify({
        jsonrpc: '2.0',
        id: 1,
        method: 'initialize',
        params: { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 'console-test', version: '1' } },
      }),
    });
    expect(initialize.status).toBe(200);
    expect(await initialize.text()).toContain('agentry-agent-Kept');
    await page.getByRole('button', { name: 'Delete agent' }).click();
    await page.getByRole('button', { name: 'Confirm delete' }).click();
    const alert = page.locator('.danger-zone [role="alert"]');
    await expect.poll(() => alert.textContent(), WAIT).toContain('agent_in_use');
    expect(await alert.textContent()).toContain('Delete those sessions first');
    expect((await shared.api('GET', `/v1/agents/${agentId}`)).status).toBe(200);
  });

  test("lists, edits and deletes an agent's memories on its page", async ({ page }) => {
    const agentId = await createAgent({ name: 'Rememberer', mcpServers: [{ kind: 'internal', name: 'memory' }] });
    const remember = async (body: Json) => {
      const created = await shared.api('POST', `/v1/agents/${agentId}/memories`, body);
      expect(created.status, JSON.stringify(created.body)).toBe(201);
      return created.body.id as string;
    };
    const kept = await remember({ content: 'Pat prefers short answers', endUser: 'pat' });
    const gone = await remember({ content: 'The launch is on Friday' });
    await page.goto(url(`/console/agents/${agentId}`));
    const list = page.getByRole('list', { name: 'Memories' });
    await expect.poll(() => list.locator('> li').count(), WAIT).toBe(2);
    expect(await list.locator('> li').first().textContent()).toContain('The launch is on Friday');
    expect(await list.locator('> li').first().textContent()).toContain('agent-wide');
    expect(await list.locator('> li').last().textContent()).toContain('end user pat');
    await accessible(page, 'agent memories');

    const patItem = list.locator('> li').filter({ hasText: 'Pat prefers' });
    await patItem.getByRole('button', { name: 'Edit' }).click();
    await patItem.getByLabel('Memory text').fill('Pat prefers bullet points');
    await patItem.getByRole('button', { name: 'Save memory' }).click();
    await expect.poll(() => list.textContent(), WAIT).toContain('Pat prefers bullet points');
    expect((await shared.api('GET', `/v1/agents/${agentId}/memories/${kept}`)).body.content).toBe(
      'Pat prefers bullet points',
    );

    const launch = list.locator('> li').filter({ hasText: 'launch' });
    await launch.getByRole('button', { name: 'Delete memory' }).click();
    await launch.getByRole('button', { name: 'Confirm delete' }).click();
    await expect.poll(() => list.locator('> li').count(), WAIT).toBe(1);
    expect((await shared.api('GET', `/v1/agents/${agentId}/memories/${gone}`)).status).toBe(404);
  });

  test("shows an agent's versions with what each changed, and restores one as a new version", async ({ page }) => {
    const agentId = await createAgent({ name: 'Versioned', instructions: 'First words.' });
    const patched = await shared.api('PATCH', `/v1/agents/${agentId}`, {
      instructions: 'Second words.',
      maxSteps: 9,
    });
    expect(patched.status, JSON.stringify(patched.body)).toBe(200);
    await page.goto(url(`/console/agents/${agentId}`));
    const list = page.getByRole('list', { name: 'Versions' });
    await expect.poll(() => list.locator('> li').count(), WAIT).toBe(2);
    const newest = list.locator('> li').first();
    expect(await newest.textContent()).toContain('v2');
    expect(await newest.textContent()).toContain('current');
    await newest.getByRole('button', { name: 'Show changes' }).click();
    const changes = page.getByRole('table', { name: 'Changes in v2' });
    await expect.poll(() => changes.textContent(), WAIT).toContain('/instructions');
    expect(await changes.textContent()).toContain('"First words."');
    expect(await changes.textContent()).toContain('"Second words."');
    expect(await changes.textContent()).toContain('/maxSteps');
    await accessible(page, 'agent versions');

    const first = list.locator('> li').last();
    await first.getByRole('button', { name: 'Restore v1' }).click();
    expect(await first.textContent()).toContain('as v3?');
    await first.getByRole('button', { name: 'Confirm restore' }).click();
    await expect.poll(() => list.locator('> li').count(), WAIT).toBe(3);
    const stored = await shared.api('GET', `/v1/agents/${agentId}`);
    expect(stored.body.agent).toMatchObject({ version: 3, instructions: 'First words.', maxSteps: 32 });
    // The form shows the restored configuration.
    await expect.poll(() => page.getByLabel('Instructions').inputValue(), WAIT).toBe('First words.');
  });

  test("shows on the agent's page the tools it configures that this deployment cannot run", async ({ page }) => {
    const overreaching = await createAgent({
      name: 'Overreaching',
      mcpServers: [
        { kind: 'internal', name: 'coding_agent' },
        { kind: 'internal', name: 'github' },
      ],
    });
    await page.goto(url(`/console/agents/${overreaching}`));
    const notes = page.getByRole('status', { name: 'Warnings' }).locator('li');
    const messages = ['coding_agent', 'github'].map(
      (name) =>
        `internal tool "${name}" is configured on the agent but this deployment cannot run it; the turn runs without it`,
    );
    // At the top of the form, and beside the built-in tools they concern.
    await expect.poll(() => notes.allTextContents(), WAIT).toEqual(messages.map((message) => `${message} (see below)`));
    expect(
      await page.getByRole('group', { name: 'Built-in tools' }).locator('.field-warning').allTextContents(),
    ).toEqual(messages);
    const clean = await createAgent({ name: 'Plain' });
    await page.goto(url(`/console/agents/${clean}`));
    await page.getByRole('heading', { name: 'Plain', level: 1 }).waitFor(WAIT);
    expect(await notes.count()).toBe(0);
  });

  test('uploads and lists files, and shows usage, connectors and sessions', async ({ page }) => {
    const { sessionId } = await agentWithTurn('Accountant');
    await page.goto(url('/console/files'));
    await page.getByLabel('File', { exact: true }).setInputFiles({
      name: 'notes.md',
      mimeType: 'text/markdown',
      buffer: Buffer.from('# Notes\n'),
    });
    await page.getByRole('button', { name: 'Upload' }).click();
    await expect.poll(() => page.locator('tbody').textContent(), WAIT).toContain('notes.md');
    await accessible(page, 'files');
    await snap(page, 'files');

    await page.goto(url('/console/usage'));
    await page.getByRole('img', { name: /Daily cost per agent/ }).waitFor();
    expect(await page.locator('.big').textContent()).toBe('Unlimited');
    // Agents are named once the page's list of agents has arrived (ids until then).
    await expect.poll(() => page.locator('tbody').textContent(), WAIT).toContain('Accountant');
    await accessible(page, 'usage');
    await snap(page, 'usage');

    await page.goto(url('/console/connectors'));
    await page.getByRole('heading', { name: 'Connectors', level: 1 }).waitFor();
    await accessible(page, 'connectors');

    await page.goto(url('/console/sessions'));
    await page.locator('tbody tr').first().waitFor();
    await accessible(page, 'sessions');
    await snap(page, 'sessions');
    await page.goto(url(`/console/sessions/${sessionId}`));
    await page.locator('li.turn').first().waitFor();
    expect(await page.title()).toMatch(/^Session/);
    await accessible(page, 'session');
  });

  test('draws usage by agent and by model over a range, with its table and CSV', async ({ page }) => {
    const name = `Ledger-${randomUUID().slice(0, 6)}`;
    const { agentId } = await agentWithTurn(name);
    const day = new Date().toISOString().slice(0, 10);
    await page.goto(url('/console/usage'));
    await page.getByRole('img', { name: /Daily cost per agent/ }).waitFor();
    const row = page.locator('tbody tr', { hasText: name });
    await row.waitFor();
    // Turns, input, cached input, output tokens, cost: the agent's one turn.
    const cells = await row.locator('td').allTextContents();
    expect(cells[0]).toBe(name);
    expect(cells[1]).toBe('1');
    expect(Number(cells[2])).toBeGreaterThan(0);
    expect(Number(cells[4])).toBeGreaterThan(0);
    // The scripted model is free: its turns draw bars of tokens, not of cost.
    await page.getByLabel('Chart').selectOption('tokens');
    await page.getByRole('img', { name: /Daily tokens per agent/ }).waitFor();
    await page.locator('svg rect title', { hasText: `${day} · ${name}: ` }).waitFor({ state: 'attached' });

    await page.getByLabel('View by').selectOption('model');
    await page.getByRole('img', { name: /Daily tokens per model/ }).waitFor();
    await page.locator('tbody tr', { hasText: 'scripted' }).first().waitFor();
    await page.locator('svg rect title', { hasText: `${day} · scripted: ` }).waitFor({ state: 'attached' });
    expect(page.url()).toContain('by=model');
    await accessible(page, 'usage by model');
    await snap(page, 'usage-by-model');

    // A range that ends before today has none of it.
    await page.getByLabel('To (UTC)').fill('2020-01-31');
    await page.getByLabel('From (UTC)').fill('2020-01-01');
    await page.getByText('No usage in this range.').waitFor();
    expect(await page.locator('tbody tr').count()).toBe(0);
    await page.getByLabel('Range').selectOption('7');
    await page.locator('tbody tr', { hasText: 'scripted' }).first().waitFor();
    await page.getByLabel('View by').selectOption('agent');
    await page.locator('tbody tr', { hasText: name }).waitFor();

    const [download] = await Promise.all([
      page.waitForEvent('download'),
      page.getByRole('button', { name: 'Download CSV' }).click(),
    ]);
    expect(download.suggestedFilename()).toMatch(/^usage-\d{4}-\d{2}-\d{2}-to-\d{4}-\d{2}-\d{2}\.csv$/);
    const csv = readFileSync((await download.path()) ?? '', 'utf8');
    const [header, ...records] = csv.trimEnd().split('\r\n');
    expect(header).toBe(
      'day,agent_id,api_key_id,api_key_prefix,model,source,end_user,turns,input_tokens,cached_input_tokens,output_tokens,total_tokens,cost_usd',
    );
    const mine = records.filter((record) => record.split(',')[1] === agentId);
    expect(mine).toHaveLength(1);
    expect(mine[0]?.startsWith(`${day},${agentId},`)).toBe(true);
    expect(mine[0]).toContain(',sessions,,1,');
  });

  test('fits every page at phone width (tables scroll inside their box) and at desktop width, axe-clean', async ({
    newPage,
  }) => {
    const { agentId, sessionId } = await agentWithTurn('Pocket');
    const runId = (await shared.api('GET', `/v1/runs?agent_id=${agentId}`)).body.data[0].id;
    const endpoint = await shared.api('POST', '/v1/webhook_endpoints', {
      name: 'pocket hook',
      url: `${receiver.url}/hook`,
      event_types: ['agent.session.created'],
    });
    expect(endpoint.status, JSON.stringify(endpoint.body)).toBe(200);
    const pages: [string, string][] = [
      ['/console/agents', 'Agents'],
      ['/console/agents/new', 'New agent'],
      [`/console/agents/${agentId}`, 'Pocket'],
      [`/console/agents/${agentId}/chat?session=${sessionId}`, 'Playground: Pocket'],
      ['/console/sessions', 'Sessions'],
      [`/console/sessions/${sessionId}`, 'Hello there'],
      ['/console/runs', 'Runs'],
      [`/console/runs/${runId}`, ''],
      ['/console/connectors', 'Connectors'],
      ['/console/webhooks', 'Webhooks'],
      [`/console/webhooks/${endpoint.body.id}`, 'pocket hook'],
      ['/console/files', 'Files'],
      ['/console/usage', 'Usage'],
      ['/console/audit', 'Audit log'],
      ['/console/settings', 'Settings'],
    ];
    for (const viewport of [
      { width: 390, height: 844 },
      { width: 1440, height: 900 },
    ]) {
      const page = await newPage({ viewport });
      await page.goto(url('/console/sign-in'));
      await page.getByLabel('API key').waitFor();
      const fits = async (what: string) => {
        const widths = await page.evaluate('[document.scrollingElement.scrollWidth, innerWidth]');
        // What sticks out, named in the failure.
        const wide = await page.evaluate(`[...document.querySelectorAll('body *')]
          .filter((element) => element.getBoundingClientRect().right > innerWidth + 1 && element.parentElement.getBoundingClientRect().right <= innerWidth + 1)
          .slice(0, 5).map((element) => element.tagName + '.' + element.className)`);
        expect(widths, `${what} at ${viewport.width} px: page width, window width (${wide})`).toEqual([
          viewport.width,
          viewport.width,
        ]);
        await accessible(page, `${what} at ${viewport.width} px`);
      };
      await fits('sign-in');
      await signIn(page, shared.url);
      // One line of scopes in the header, whatever the width.
      const scopes = page.locator('.scopes');
      await expect.poll(() => scopes.getAttribute('title'), WAIT).toContain('webhooks:write');
      expect(await page.evaluate("document.querySelector('.scopes').getClientRects().length")).toBe(1);
      expect(await page.evaluate("document.querySelector('.scopes').offsetHeight < 30")).toBe(true);
      for (const [path, heading] of pages) {
        await page.goto(url(path));
        await page.locator('h1').first().waitFor();
        if (heading !== '') await page.getByRole('heading', { name: heading, level: 1 }).waitFor();
        await expect.poll(() => page.getByText(/^Loading /).count(), WAIT).toBe(0);
        await fits(path);
      }
      // Keyboard focus is visible: the focused link has an outline.
      await page.keyboard.press('Tab');
      await page.keyboard.press('Tab');
      expect(await page.evaluate('getComputedStyle(document.activeElement).outlineStyle')).not.toBe('none');
    }
  });

  test('follows the system dark theme', async ({ newPage }) => {
    const { agentId, sessionId } = await agentWithTurn('Nocturnal');
    const night = await newPage({ colorScheme: 'dark' });
    await signIn(night, shared.url);
    await night.goto(url(`/console/agents/${agentId}/chat?session=${sessionId}`));
    await night.locator('li.turn').first().waitFor();
    const background = await night.evaluate('getComputedStyle(document.documentElement).backgroundColor');
    expect(background).toBe('rgb(21, 23, 28)');
    await accessible(night, 'playground, dark');
    await snap(night, 'playground-dark');
  });

  test('approves and denies a tool call from the playground, showing its tool, server and arguments', async ({
    page,
  }) => {
    const agentId = await createAgent({
      name: 'careful',
      mcpServers: [{ kind: 'internal', name: 'http_client' }],
      toolApprovals: { default: 'always_ask', overrides: {} },
    });
    await page.goto(url(`/console/agents/${agentId}/chat`));
    await page.getByLabel('Message', { exact: true }).waitFor();

    const denied = await send(page, 'call http_request {"method":"POST","url":"https://example.com/orders"}');
    const form = denied.locator('form.approval');
    await form.waitFor();
    expect(await denied.getAttribute('data-status')).toBe('requires_action');
    const shown = (await form.textContent()) ?? '';
    expect(shown).toContain('http_request');
    expect(shown).toContain('agentry');
    expect(await form.locator('pre').textContent()).toBe('{"method":"POST","url":"https://example.com/orders"}');
    await accessible(page, 'playground with a tool approval');
    await snap(page, 'playground-approval');
    await form.getByLabel('Reason (optional)').fill('not from the console');
    await form.getByRole('button', { name: 'Deny' }).click();
    await expect.poll(() => denied.getAttribute('data-status'), WAIT).toBe('completed');
    expect(await denied.locator('.reply').textContent()).toContain('Reason: not from the console');

    const approved = await send(page, 'call http_request {"method":"DELETE","url":"https://example.com/orders/1"}');
    await approved.locator('form.approval').waitFor();
    await approved.getByRole('button', { name: 'Approve' }).click();
    await expect.poll(() => approved.getAttribute('data-status'), WAIT).toBe('completed');
    // It ran (once): the network policy refused the request, which is what the model read.
    expect(await approved.locator('.reply').textContent()).toContain('refused');
  });
});
