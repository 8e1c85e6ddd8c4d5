/**
 * Screenshots of every console page for docs/console.md: starts its own Agentry process on a temporary SQLite data
 * directory (scripted model), seeds data through the API (an agent with tools and an MCP connector made with the
 * SDK, sessions with turns, a tool call and an approval waiting, a schedule, a webhook endpoint with a delivery to a
 * local receiver, a file, usage), signs in with Debian's Chromium and saves each route of console/src/routes.tsx
 * at 1440×900 and 390×844, full page, as docs/console/<page>-<desktop|phone>.png. A route that renders the
 * not-found page is skipped with a message, so pages added later are picked up once they exist.
 * Run: `npm run console:build && npm run console:screenshots`.
 */
import { randomUUID } from 'node:crypto';
import { mkdirSync, mkdtempSync, readdirSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Browser, Page } from 'playwright-core';
import { chromiumAvailable, launchChromium } from '../test/helpers/browser.ts';
import { httpClient, type Json, textParts, WEATHER_TOOL, waitUntil } from '../test/helpers/fixtures.ts';
import { testKey } from '../test/helpers/harness.ts';
import { startModernMcpServer } from '../test/helpers/mcp-servers.ts';
import { startServerProcess } from '../test/helpers/server-process.ts';
import { startReceiver } from '../test/helpers/webhook-receiver.ts';
import { ensureConsoleBuilt } from './console-build.ts';

const OUT = join(import.meta.dirname, '..', 'docs', 'console');
const SIZES = { desktop: { width: 1440, height: 900 }, phone: { width: 390, height: 844 } } as const;
/** The browser's clock stands this long after seeding, so relative dates ("5 minutes ago") read the same each run. */
const CLOCK_AHEAD_MS = 5 * 60_000;

function log(message: string): void {
  process.stdout.write(`[screenshots] ${message}\n`);
}

async function main(): Promise<void> {
  if (!chromiumAvailable()) throw new Error('needs /usr/bin/chromium');
  ensureConsoleBuilt((line) => log(line));
  const key = testKey();
  const dataDir = mkdtempSync(join(tmpdir(), 'agentry-screenshots-'));
  const cleanup: (() => Promise<unknown> | unknown)[] = [() => rmSync(dataDir, { recursive: true, force: true })];
  try {
    const [receiver, mcp] = await Promise.all([startReceiver(), startModernMcpServer({ name: 'inventory' })]);
    cleanup.push(
      () => receiver.close(),
      () => mcp.close(),
    );
    const server = await startServerProcess({
      AGENTRY_DATA_DIR: dataDir,
      AGENTRY_BOOTSTRAP_KEY: key,
      AGENTRY_ALLOW_INSECURE_DESTINATIONS: 'true',
      AGENTRY_POLL_MS: '200',
      LOG_LEVEL: 'warn',
    });
    cleanup.push(() => server.stop());
    const ids = await seed(server.url, key, receiver.url, mcp.url);
    const browser = await launchChromium();
    cleanup.push(() => browser.close());
    await shoot(browser, server.url, key, ids);
    const files = readdirSync(OUT).filter((name) => name.endsWith('.png'));
    const total = files.reduce((sum, name) => sum + statSync(join(OUT, name)).size, 0);
    log(`${files.length} images in docs/console, ${(total / 1024 / 1024).toFixed(2)} MB together`);
  } finally {
    for (const step of cleanup.reverse()) await step();
  }
}

interface Seeded {
  agentId: string;
  sessionId: string;
  runId: string;
  webhookId: string;
  scheduleId: string;
  seededAt: number;
}

async function seed(base: string, key: string, receiverUrl: string, mcpUrl: string): Promise<Seeded> {
  const api = httpClient(base, key);
  const ok = (response: { status: number; body: Json }, what: string): Json => {
    if (response.status >= 300) throw new Error(`${what}: ${response.status} ${JSON.stringify(response.body)}`);
    return response.body;
  };
  const webhook = ok(
    await api('POST', '/v1/webhook_endpoints', {
      name: 'Order desk',
      url: `${receiverUrl}/hooks`,
      event_types: ['agent.session.idle'],
    }),
    'webhook endpoint',
  );
  const agent = ok(
    await api('POST', '/v1/agents', {
      name: 'Support assistant',
      description: 'Answers customer questions and checks stock',
      instructions: 'Be brief and friendly. Ask before changing anything.',
      mcpServers: [
        { kind: 'internal', name: 'http_client' },
        { type: 'url', name: 'inventory', url: mcpUrl },
      ],
      clientTools: [WEATHER_TOOL],
      toolApprovals: { default: 'always_ask', overrides: {} },
    }),
    'agent',
  ).agent;
  ok(await api('POST', '/v1/agents', { name: 'Release notes writer' }), 'second agent');
  const sessionOf = async (title: string) => {
    const session = ok(await api('POST', '/v1/sessions', { agentId: agent.id, title }), 'session').session;
    return session.id as string;
  };
  const say = async (sessionId: string, text: string, statuses: string[]) => {
    const posted = ok(
      await api('POST', `/v1/sessions/${sessionId}/messages`, textParts(text), { 'idempotency-key': randomUUID() }),
      'message',
    );
    return waitUntil(
      async () => {
        const message = (await api('GET', `/v1/sessions/${sessionId}/messages/${posted.id}`)).body?.message;
        return statuses.includes(message?.status) ? message : null;
      },
      { what: `message to be ${statuses.join(' or ')}` },
    );
  };
  const main = await sessionOf('Order 1042 delivery');
  await say(main, 'Hello, where is my order?', ['completed']);
  await say(main, 'What is the weather in Paris?', ['requires_action', 'completed']);
  const other = await sessionOf('Refund question');
  await say(other, 'Can I get a refund?', ['completed']);
  await say(other, 'call http_request {"method":"POST","url":"https://example.com/refunds"}', ['requires_action']);
  const schedule = ok(
    await api('POST', '/v1/schedules', {
      name: 'Morning stock check',
      agent_id: agent.id,
      input: 'Check stock levels',
      interval_seconds: 86_400,
    }),
    'schedule',
  );
  const file = new FormData();
  file.append('file', new Blob(['# Returns policy\n\nThirty days, receipt required.\n']), 'returns-policy.md');
  const uploaded = await fetch(`${base}/v1/files`, {
    method: 'POST',
    headers: { authorization: `Bearer ${key}` },
    body: file,
  });
  ok({ status: uploaded.status, body: { text: await uploaded.text() } }, 'file');
  const runs = ok(await api('GET', '/v1/runs?limit=1'), 'runs').data;
  return {
    agentId: agent.id,
    sessionId: main,
    runId: runs[0].id,
    webhookId: webhook.id ?? webhook.endpoint?.id,
    scheduleId: schedule.id ?? schedule.schedule?.id,
    seededAt: Date.now(),
  };
}

/** Every route of console/src/routes.tsx, with a seeded id where it takes one. */
function pages(ids: Seeded): [string, string][] {
  return [
    ['sign-in', '/console/sign-in'],
    ['agents', '/console/agents'],
    ['agent-new', '/console/agents/new'],
    ['agent', `/console/agents/${ids.agentId}`],
    ['playground', `/console/agents/${ids.agentId}/chat`],
    ['sessions', '/console/sessions'],
    ['session', `/console/sessions/${ids.sessionId}`],
    ['runs', '/console/runs'],
    ['run', `/console/runs/${ids.runId}`],
    ['webhooks', '/console/webhooks'],
    ['webhook', `/console/webhooks/${ids.webhookId}`],
    ['files', '/console/files'],
    ['usage', '/console/usage'],
    ['connectors', '/console/connectors'],
    ['schedules', '/console/schedules'],
    ['schedule', `/console/schedules/${ids.scheduleId}`],
    ['approvals', '/console/approvals'],
    ['audit', '/console/audit'],
    ['settings', '/console/settings'],
  ];
}

async function shoot(browser: Browser, base: string, key: string, ids: Seeded): Promise<void> {
  mkdirSync(OUT, { recursive: true });
  for (const [size, viewport] of Object.entries(SIZES)) {
    const context = await browser.newContext({ viewport, colorScheme: 'light', reducedMotion: 'reduce' });
    context.setDefaultTimeout(60_000);
    const page = await context.newPage();
    await page.clock.setFixedTime(ids.seededAt + CLOCK_AHEAD_MS);
    for (const [name, path] of pages(ids)) {
      if (name !== 'sign-in' && page.url().includes('/sign-in')) await signIn(page, base, key);
      await page.goto(`${base}${path}`);
      await settle(page);
      if (await notFound(page)) {
        if (size === 'desktop') log(`skipped ${path}: the console has no such page yet`);
        continue;
      }
      await page.screenshot({ path: join(OUT, `${name}-${size}.png`), fullPage: true, animations: 'disabled' });
      log(`${name}-${size}.png`);
    }
    await context.close();
  }
}

async function signIn(page: Page, base: string, key: string): Promise<void> {
  await page.goto(`${base}/console/sign-in`);
  await page.getByLabel('API key').fill(key);
  await page.getByRole('button', { name: 'Sign in' }).click();
  await page.getByRole('heading', { name: 'Agents', level: 1 }).waitFor();
}

/** Waits for the page's requests to finish and its heading to show. */
async function settle(page: Page): Promise<void> {
  await page.waitForLoadState('networkidle');
  await page.locator('h1').first().waitFor();
  await page.waitForLoadState('networkidle');
}

async function notFound(page: Page): Promise<boolean> {
  const heading = (await page.locator('h1').first().textContent()) ?? '';
  return /not found/i.test(heading);
}

await main();
