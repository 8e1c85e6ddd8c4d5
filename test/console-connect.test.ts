/**
 * The console's Connect flow for an MCP server that signs in with OAuth (docs/mcp-auth.md), in a real browser
 * (Debian's Chromium through playwright-core) against a real Agentry process: register the connector on the
 * Connectors page, click Connect, sign in on the local authorization server's page that opens, land on Agentry's
 * callback page ("Connected …"), and see the server's tools on the connector. The authorization server is the MCP
 * SDK's (test/helpers/oauth-server.ts) with a sign-in form; the MCP server is a real one it guards.
 *
 * Stands alone: its own server process and data, its own sign-in to the console; waits are for conditions only.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Browser, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ensureConsoleBuilt } from '../scripts/console-build.ts';
import { chromiumAvailable, launchChromium } from './helpers/browser.ts';
import { WAIT_MS } from './helpers/deadlines.ts';
import { httpClient } from './helpers/fixtures.ts';
import { testKey } from './helpers/harness.ts';
import { type McpTestServer, startModernMcpServer } from './helpers/mcp-servers.ts';
import { type OAuthTestServer, startOAuthServer } from './helpers/oauth-server.ts';
import { type ServerProcess, startServerProcess } from './helpers/server-process.ts';

const available = chromiumAvailable();
if (!available && process.env.CI === 'true') throw new Error('the console tests need /usr/bin/chromium under CI');

const key = testKey();
const PERSON = { username: 'ada', password: 'correct horse battery staple' };

/** A port free now, so that the server's public URL (its OAuth callback) can be named before it starts. */
function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const probe = createServer();
    probe.once('error', reject);
    probe.listen(0, '127.0.0.1', () => {
      const address = probe.address();
      const port = typeof address === 'object' && address !== null ? address.port : 0;
      probe.close(() => resolve(port));
    });
  });
}

describe.skipIf(!available)('console: Connect an MCP server that signs in with OAuth', () => {
  let browser: Browser;
  let agentry: ServerProcess;
  let as: OAuthTestServer;
  let mcp: McpTestServer;
  let dataDir: string;

  beforeAll(async () => {
    ensureConsoleBuilt();
    dataDir = mkdtempSync(join(tmpdir(), 'agentry-console-connect-'));
    as = await startOAuthServer({ signIn: PERSON, metadataDocuments: false });
    mcp = await startModernMcpServer({ name: 'guarded', guard: (req, res) => as.protect(() => mcp.url)(req, res) });
    const port = await freePort();
    [agentry, browser] = await Promise.all([
      startServerProcess({
        AGENTRY_DATA_DIR: dataDir,
        AGENTRY_BOOTSTRAP_KEY: key,
        AGENTRY_ALLOW_INSECURE_DESTINATIONS: 'true',
        AGENTRY_PUBLIC_URL: `http://127.0.0.1:${port}`,
        PORT: String(port),
      }),
      launchChromium(),
    ]);
  });

  afterAll(async () => {
    await browser?.close();
    await agentry?.stop();
    await Promise.all([as?.close(), mcp?.close()]);
    if (dataDir !== undefined) rmSync(dataDir, { recursive: true, force: true });
  });

  it('registers the connector, signs in at the authorization server and lists its tools', async () => {
    const context = await browser.newContext({ viewport: { width: 1200, height: 760 } });
    context.setDefaultTimeout(WAIT_MS);
    const problems: string[] = [];
    const watch = (target: Page) => target.on('pageerror', (error) => problems.push(error.message));
    context.on('page', watch);
    try {
      const page = await context.newPage();
      await page.goto(`${agentry.url}/console/sign-in`);
      await page.getByLabel('API key').fill(key);
      await page.getByRole('button', { name: 'Sign in' }).click();
      await page.getByRole('heading', { name: 'Agents', level: 1 }).waitFor();

      await page.getByRole('link', { name: 'Connectors' }).click();
      await page.getByRole('heading', { name: 'Connectors', level: 1 }).waitFor();
      const form = page.getByRole('form', { name: 'Register an MCP server' });
      await form.getByLabel('Connector name').fill('docs');
      await form.getByLabel('Server URL').fill(mcp.url);
      await form.getByLabel('Signs in with OAuth').check();
      await form.getByRole('button', { name: 'Register' }).click();
      const card = page.locator('li.card', { has: page.getByRole('heading', { name: 'docs' }) });
      await card.getByText('signs in with OAuth').waitFor();
      expect(await card.getByText('echo', { exact: true }).count()).toBe(0);

      // Connect opens the authorization server's sign-in page in a new tab.
      const [signIn] = await Promise.all([
        context.waitForEvent('page'),
        card.getByRole('button', { name: 'Connect', exact: true }).click(),
      ]);
      await signIn.getByRole('heading', { name: 'Sign in to the test authorization server' }).waitFor();
      expect(new URL(signIn.url()).origin).toBe(as.issuer);
      await signIn.getByLabel('Username').fill(PERSON.username);
      await signIn.getByLabel('Password').fill(PERSON.password);
      await signIn.getByRole('button', { name: 'Sign in and allow' }).click();
      // Back on Agentry's callback.
      await signIn.getByText('Connected docs').first().waitFor();
      expect(signIn.url().startsWith(`${agentry.url}/v1/oauth/callback?`)).toBe(true);
      expect(await signIn.textContent('body')).toContain('connected for your organization');
      expect(as.counts.tokens).toBe(1);

      // The connector now shows the server's tools.
      await page.bringToFront();
      await page.reload();
      const connected = page.locator('li.card', { has: page.getByRole('heading', { name: 'docs' }) });
      await connected.getByText('echo', { exact: true }).waitFor();

      const api = httpClient(agentry.url, key);
      const listed = await api('GET', '/v1/mcp_servers?limit=100');
      const docs = listed.body.data.find((server: { name: string }) => server.name === 'docs');
      expect(docs.tools.map((tool: { name: string }) => tool.name)).toContain('echo');
      const credentials = await api('GET', `/v1/mcp_servers/${docs.id}/credentials`);
      expect(credentials.body.data).toEqual([expect.objectContaining({ user: null, status: 'active' })]);
      expect(problems).toEqual([]);
    } finally {
      await context.close();
    }
  });
});
