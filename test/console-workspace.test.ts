/**
 * The playground as a workspace, in Debian's Chromium (playwright-core) against a real Agentry process with the
 * scripted model: the agent edited in the side panel and saved as a new version (and a conflicting edit refused
 * with a way to load the latest), a turn's trace opened in a drawer beside the chat (time axis, span kinds in
 * colour, legend), and an MCP server's elicitation (a real SDK server on loopback calling elicitInput) answered
 * through the form built from its schema, a validation error shown at its field. Once per dialect (the server on
 * SQLite, then on Postgres); each test signs in and makes its own data; waits are for conditions.
 */
import { randomUUID } from 'node:crypto';
import type { Browser, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ensureConsoleBuilt } from '../scripts/console-build.ts';
import { chromiumAvailable, launchChromium, seriousViolations } from './helpers/browser.ts';
import { WAIT_MS } from './helpers/deadlines.ts';
import { ASK_USER_QUESTION_SERVER, httpClient, type Json, textParts, waitUntil } from './helpers/fixtures.ts';
import { type DialectName, dialects, testEnvironment, testKey } from './helpers/harness.ts';
import { type ElicitationServer, startElicitationServer } from './helpers/mcp-elicitation-server.ts';
import { type ServerProcess, startServerProcess } from './helpers/server-process.ts';

const WAIT = { timeout: WAIT_MS };
/** The computed background colour of an element, read in the page (the tests compile without the DOM library). */
const BACKGROUND = (element: unknown) =>
  (globalThis as unknown as { getComputedStyle(of: unknown): { backgroundColor: string } }).getComputedStyle(element)
    .backgroundColor;
const available = chromiumAvailable();
if (!available && process.env.CI === 'true') throw new Error('the console tests need /usr/bin/chromium under CI');

const key = testKey();
let server: ServerProcess;
let cleanup: (() => Promise<void>) | undefined;
let browser: Browser;
let mcp: ElicitationServer;
let api: ReturnType<typeof httpClient>;

/** A page in a browser context of its own, signed in with the admin key; script errors and CSP refusals collected. */
async function signedIn(problems: string[], viewport = { width: 1280, height: 800 }): Promise<Page> {
  const context = await browser.newContext({ viewport, colorScheme: 'light' });
  context.setDefaultTimeout(WAIT_MS);
  const page = await context.newPage();
  page.on('pageerror', (error) => problems.push(`page error: ${error.message}`));
  page.on('console', (message) => {
    const text = message.text();
    if (/Content.Security.Policy|Refused to/i.test(text)) problems.push(`CSP: ${text}`);
    else if (message.type() === 'error' && !/Failed to load resource/.test(text)) problems.push(`console: ${text}`);
  });
  await page.goto(`${server.url}/console/sign-in`);
  await page.getByLabel('API key').fill(key);
  await page.getByRole('button', { name: 'Sign in' }).click();
  await page.getByRole('heading', { name: 'Agents', level: 1 }).waitFor();
  return page;
}

async function accessible(page: Page, what: string): Promise<void> {
  expect(await seriousViolations(page), `${what}: serious or critical accessibility violations`).toEqual([]);
}

async function createAgent(fields: Json): Promise<string> {
  const created = await api('POST', '/v1/agents', { name: `ws-${randomUUID().slice(0, 8)}`, ...fields });
  expect(created.status, JSON.stringify(created.body)).toBe(201);
  return created.body.agent.id;
}

async function createSession(agentId: string): Promise<string> {
  const created = await api('POST', '/v1/sessions', { agentId });
  expect(created.status, JSON.stringify(created.body)).toBe(201);
  return created.body.session.id;
}

async function postMessage(sessionId: string, text: string): Promise<string> {
  const posted = await api('POST', `/v1/sessions/${sessionId}/messages`, textParts(text), {
    'idempotency-key': randomUUID(),
  });
  expect(posted.status, JSON.stringify(posted.body)).toBe(202);
  return posted.body.id;
}

async function messageIn(sessionId: string, messageId: string, statuses: string[]): Promise<Json> {
  return waitUntil(
    async () => {
      const message = (await api('GET', `/v1/sessions/${sessionId}/messages/${messageId}`)).body?.message;
      return statuses.includes(message?.status) ? message : null;
    },
    { what: `message ${messageId} to be ${statuses.join(' or ')}` },
  );
}

/** Sends a message from the playground; returns its turn once it is listed. */
async function send(page: Page, text: string) {
  const before = await page.locator('li.turn').count();
  await page.getByLabel('Message', { exact: true }).fill(text);
  await page.getByRole('button', { name: 'Send', exact: true }).click();
  await expect.poll(() => page.locator('li.turn').count(), WAIT).toBe(before + 1);
  return page.locator('li.turn').last();
}

describe.skipIf(!available).each(dialects())('console workspace (%s)', (dialect: DialectName) => {
  beforeAll(async () => {
    ensureConsoleBuilt();
    const environment = testEnvironment(dialect);
    cleanup = environment.cleanup;
    [server, browser, mcp] = await Promise.all([
      startServerProcess({
        ...environment.env,
        AGENTRY_BOOTSTRAP_KEY: key,
        AGENTRY_ALLOW_INSECURE_DESTINATIONS: 'true',
        AGENTRY_POLL_MS: '200',
      }),
      launchChromium(),
      startElicitationServer(),
    ]);
    api = httpClient(server.url, key);
  });
  afterAll(async () => {
    await browser?.close();
    await server?.stop();
    await mcp?.close();
    await cleanup?.();
  });

  it('edits the instructions in the side panel and saves them as a new version', async () => {
    const problems: string[] = [];
    const agentId = await createAgent({ instructions: 'Be brief.' });
    const page = await signedIn(problems);
    await page.goto(`${server.url}/console/agents/${agentId}/chat`);
    const panel = page.getByRole('region', { name: /Agent · v\d+/ });
    const instructions = panel.getByLabel('Instructions');
    await expect.poll(() => instructions.inputValue(), WAIT).toBe('Be brief.');
    expect(await panel.getByLabel('Model').inputValue()).toBe('scripted');
    await accessible(page, 'playground with the agent panel');

    await instructions.fill('Be brief and kind.');
    await panel.getByLabel('Tool approvals').selectOption('always_ask');
    await panel.getByRole('button', { name: 'Save as new version' }).click();
    await page.getByText('Saved as version 2.').waitFor();
    await page.getByRole('heading', { name: 'Agent · v2' }).waitFor();

    const agent = (await api('GET', `/v1/agents/${agentId}`)).body.agent;
    expect(agent).toMatchObject({ version: 2, instructions: 'Be brief and kind.', model: 'scripted' });
    expect(agent.toolApprovals.default).toBe('always_ask');
    const versions = (await api('GET', `/v1/agents/${agentId}/versions`)).body.data;
    expect(versions.map((entry: Json) => entry.version)).toEqual([2, 1]);
    // Nothing edited: nothing to save.
    expect(await panel.getByRole('button', { name: 'Save as new version' }).isDisabled()).toBe(true);
    expect(problems).toEqual([]);
  });

  it('refuses an edit of a version changed meanwhile, and loads the latest on request', async () => {
    const problems: string[] = [];
    const agentId = await createAgent({ instructions: 'First.' });
    const page = await signedIn(problems);
    await page.goto(`${server.url}/console/agents/${agentId}/chat`);
    const panel = page.getByRole('region', { name: /Agent · v1/ });
    const instructions = panel.getByLabel('Instructions');
    await expect.poll(() => instructions.inputValue(), WAIT).toBe('First.');
    await instructions.fill('Mine.');

    // Someone else saves version 2 while this edit is open.
    const other = await api('PATCH', `/v1/agents/${agentId}`, { instructions: 'Theirs.' });
    expect(other.status, JSON.stringify(other.body)).toBe(200);

    await panel.getByRole('button', { name: 'Save as new version' }).click();
    const alert = panel.getByRole('alert');
    await alert.getByText('the agent changed since you started editing').waitFor();
    expect(await alert.textContent()).toContain('version_conflict');
    // Nothing was overwritten.
    const kept = (await api('GET', `/v1/agents/${agentId}`)).body.agent;
    expect(kept).toMatchObject({ version: 2, instructions: 'Theirs.' });

    await alert.getByRole('button', { name: 'Load latest version' }).click();
    const latest = page.getByRole('region', { name: /Agent · v2/ });
    await expect.poll(() => latest.getByLabel('Instructions').inputValue(), WAIT).toBe('Theirs.');
    expect(await latest.getByRole('alert').count()).toBe(0);

    // The edit made again on the latest version saves as version 3.
    await latest.getByLabel('Instructions').fill('Mine, after theirs.');
    await latest.getByRole('button', { name: 'Save as new version' }).click();
    await page.getByText('Saved as version 3.').waitFor();
    expect((await api('GET', `/v1/agents/${agentId}`)).body.agent.instructions).toBe('Mine, after theirs.');
    expect(problems).toEqual([]);
  });

  it("opens a turn's trace in a drawer beside the chat, on a time axis with span kinds in colour", async () => {
    const problems: string[] = [];
    const agentId = await createAgent({ mcpServers: [ASK_USER_QUESTION_SERVER] });
    const sessionId = await createSession(agentId);
    const messageId = await postMessage(sessionId, 'ask What is your name?\n---\nNice to meet you');
    await messageIn(sessionId, messageId, ['requires_action']);
    const answered = await api('POST', `/v1/sessions/${sessionId}/messages/${messageId}/answer`, {
      actionId: 0,
      answer: 'Ada',
    });
    expect(answered.status, JSON.stringify(answered.body)).toBe(200);
    const done = await messageIn(sessionId, messageId, ['completed']);

    const page = await signedIn(problems);
    await page.goto(`${server.url}/console/agents/${agentId}/chat?session=${sessionId}`);
    const turn = page.locator(`li.turn[data-message-id="${messageId}"]`);
    await turn.getByRole('button', { name: 'Show trace beside the chat' }).click();
    const drawer = page.getByRole('region', { name: /Trace of run/ });
    await drawer.locator('[data-span-kind="tool_call"]').waitFor();
    // Still the playground, the run in its URL; the conversation still shown.
    const address = new URL(page.url());
    expect(address.pathname).toBe(`/console/agents/${agentId}/chat`);
    expect(address.searchParams.get('trace')).toBe(done.runId);
    expect(await turn.isVisible()).toBe(true);
    expect(await turn.getByRole('button', { name: 'Show trace beside the chat' }).getAttribute('aria-pressed')).toBe(
      'true',
    );

    expect(await drawer.locator('[data-span-kind="agent_step"]').count()).toBe(2);
    expect(await drawer.locator('[data-span-kind="model_call"]').count()).toBe(2);
    const tool = drawer.locator('[data-span-kind="tool_call"]');
    expect(await tool.locator('.span-name').textContent()).toBe('ask_user_question');
    // Bars are coloured by kind: each kind its own colour, the legend naming them.
    const colour = (kind: string) => drawer.locator(`[data-span-kind="${kind}"] .bar`).first().evaluate(BACKGROUND);
    const colours = [await colour('agent_step'), await colour('model_call'), await colour('tool_call')];
    expect(new Set(colours).size).toBe(3);
    const legend = drawer.getByRole('list', { name: 'Span kinds' });
    expect(await legend.textContent()).toMatch(/agent step.*model call.*tool call/);
    const swatch = await legend.locator('.bar-kind-tool_call').evaluate(BACKGROUND);
    expect(swatch).toBe(colours[2]);
    // The axis: offsets from the run's start, the first at +0 ms.
    const ticks = drawer.getByRole('list', { name: "Time from the run's start" }).getByRole('listitem');
    const tickCount = await ticks.count();
    expect(tickCount).toBeGreaterThanOrEqual(2);
    expect(await ticks.first().textContent()).toBe('+0 ms');
    expect(await ticks.last().textContent()).toMatch(/^\+\d+(\.\d+)? (ms|s)$/);
    // The tool call's bar starts where the first model call's ends: to its right.
    const left = (kind: string) =>
      drawer
        .locator(`[data-span-kind="${kind}"] .bar`)
        .first()
        .evaluate((bar) => bar.getBoundingClientRect().left);
    expect(await left('tool_call')).toBeGreaterThanOrEqual(await left('model_call'));
    await tool.locator('summary').click();
    expect(await tool.locator('.span-body').textContent()).toContain('Ada');
    await accessible(page, 'playground with the trace drawer');

    await drawer.getByRole('button', { name: 'Close trace' }).click();
    await page.getByRole('region', { name: /Agent · v1/ }).waitFor();
    expect(new URL(page.url()).searchParams.get('trace')).toBeNull();

    // The trace page shows the same waterfall: axis and legend.
    await page.goto(`${server.url}/console/runs/${done.runId}`);
    await page.locator('[data-span-kind="tool_call"]').waitFor();
    expect(await page.getByRole('list', { name: "Time from the run's start" }).getByRole('listitem').count()).toBe(
      tickCount,
    );
    expect(await page.getByRole('list', { name: 'Span kinds' }).textContent()).toContain('tool call');
    expect(problems).toEqual([]);
  });

  it("answers an MCP server's elicitation through the form built from its schema", async () => {
    const problems: string[] = [];
    const agentId = await createAgent({ mcpServers: [{ type: 'url', name: 'asking', url: mcp.url }] });
    const page = await signedIn(problems);
    await page.goto(`${server.url}/console/agents/${agentId}/chat`);
    const turn = await send(page, 'call book_table {}');
    const form = turn.getByRole('form', { name: 'Input for book_table' });
    await form.waitFor();
    expect(await form.textContent()).toContain('Who is the table for?');
    const name = form.getByLabel('name (required)');
    const guests = form.getByLabel('guests (required)');
    expect(await guests.getAttribute('type')).toBe('number');
    await accessible(page, 'playground with an elicitation form');

    // Content that does not fit the schema (guests has a minimum of 1): the API's error at the field.
    await name.fill('Ada');
    await guests.fill('0');
    await form.getByRole('button', { name: 'Accept' }).click();
    await expect.poll(() => guests.getAttribute('aria-invalid'), WAIT).toBe('true');
    const describedBy = (await guests.getAttribute('aria-describedby')) ?? '';
    const fieldError = page.locator(`[id="${describedBy.split(' ').at(-1)}"]`);
    expect(await fieldError.textContent()).toContain('answer.content.guests');
    expect(await name.getAttribute('aria-invalid')).toBe('false');

    await guests.fill('4');
    await form.getByRole('button', { name: 'Accept' }).click();
    await turn.getByText('book_table: booked for Ada, 4 guests').waitFor();
    await expect.poll(() => turn.getAttribute('data-status'), WAIT).toBe('completed');
    expect(mcp.answers.at(-1)).toEqual({ action: 'accept', content: { name: 'Ada', guests: 4 } });

    // URL mode: the link to open, and Decline.
    const second = await send(page, 'call open_link {}');
    const linkForm = second.getByRole('form', { name: 'Input for open_link' });
    await linkForm.waitFor();
    expect(await linkForm.getByRole('link').getAttribute('href')).toBe('https://calendar.example/connect');
    expect(await linkForm.getByRole('textbox').count()).toBe(0);
    await linkForm.getByRole('button', { name: 'Decline' }).click();
    await expect.poll(() => second.getAttribute('data-status'), WAIT).toBe('completed');
    expect(mcp.answers.at(-1)).toEqual({ action: 'decline' });
    expect(problems).toEqual([]);
  });

  it('keeps the workspace within a phone-width screen', async () => {
    const problems: string[] = [];
    const agentId = await createAgent({});
    const sessionId = await createSession(agentId);
    const messageId = await postMessage(sessionId, 'Hello there');
    const done = await messageIn(sessionId, messageId, ['completed']);
    const page = await signedIn(problems, { width: 390, height: 844 });
    await page.goto(`${server.url}/console/agents/${agentId}/chat?session=${sessionId}&trace=${done.runId}`);
    await page.locator('.trace-drawer [data-span-kind="model_call"]').waitFor();
    const [scrollWidth, innerWidth] = (await page.evaluate(
      '[document.scrollingElement.scrollWidth, innerWidth]',
    )) as number[];
    expect(scrollWidth).toBeLessThanOrEqual(innerWidth ?? 0);
    expect(problems).toEqual([]);
  });
});
