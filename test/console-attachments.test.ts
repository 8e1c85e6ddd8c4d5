/**
 * Files attached in the playground, in Debian's Chromium (playwright-core) against a real Agentry process with the
 * scripted model: an image and a text file chosen (the Attach button takes keyboard focus), uploaded, sent with the
 * first message, shown in the transcript (the image as a thumbnail fetched with the key) and still there after a
 * reload; an upload over the limit and a file no model can read refused in words at their chip, at phone width. Once
 * per dialect; each test signs in and makes its own data; waits are for conditions.
 */
import { randomUUID } from 'node:crypto';
import type { Browser, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ensureConsoleBuilt } from '../scripts/console-build.ts';
import { chromiumAvailable, launchChromium, seriousViolations } from './helpers/browser.ts';
import { WAIT_MS } from './helpers/deadlines.ts';
import { httpClient, type Json } from './helpers/fixtures.ts';
import { type DialectName, dialects, testEnvironment, testKey } from './helpers/harness.ts';
import { type ServerProcess, startServerProcess } from './helpers/server-process.ts';

const WAIT = { timeout: WAIT_MS };
const available = chromiumAvailable();
if (!available && process.env.CI === 'true') throw new Error('the console tests need /usr/bin/chromium under CI');

/** A real 1x1 PNG. */
const PNG = Buffer.from(
  'iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg==',
  'base64',
);
const NOTES = 'The quarterly numbers went up by four percent.';
/** Small, so that a test can go over it. */
const UPLOAD_LIMIT = 4096;

const key = testKey();
let server: ServerProcess;
let cleanup: (() => Promise<void>) | undefined;
let browser: Browser;
let api: ReturnType<typeof httpClient>;

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

async function createAgent(): Promise<string> {
  const created = await api('POST', '/v1/agents', { name: `attach-${randomUUID().slice(0, 8)}` });
  expect(created.status, JSON.stringify(created.body)).toBe(201);
  return created.body.agent.id;
}

/** Chooses files as the Attach button's file input would (the button is a real, focusable button). */
async function attach(page: Page, files: { name: string; mimeType: string; buffer: Buffer }[]): Promise<void> {
  const button = page.getByRole('button', { name: 'Attach files' });
  await button.focus();
  expect(await page.evaluate('document.activeElement.textContent')).toBe('Attach files');
  const input = page.getByLabel('Files to attach');
  expect(await input.getAttribute('multiple')).not.toBeNull();
  await input.setInputFiles(files);
}

/** Whether the image has loaded (its natural width), read in the page. */
const loaded = (page: Page) => page.evaluate("document.querySelector('li.turn img.thumbnail')?.naturalWidth > 0");

describe.skipIf(!available).each(dialects())('console attachments (%s)', (dialect: DialectName) => {
  beforeAll(async () => {
    ensureConsoleBuilt();
    const environment = testEnvironment(dialect);
    cleanup = environment.cleanup;
    [server, browser] = await Promise.all([
      startServerProcess({
        ...environment.env,
        AGENTRY_BOOTSTRAP_KEY: key,
        AGENTRY_POLL_MS: '200',
        AGENTRY_MAX_UPLOAD_BYTES: String(UPLOAD_LIMIT),
      }),
      launchChromium(),
    ]);
    api = httpClient(server.url, key);
  });
  afterAll(async () => {
    await browser?.close();
    await server?.stop();
    await cleanup?.();
  });

  it('sends an image and a text file with the first message, shows them, and still after a reload', async () => {
    const problems: string[] = [];
    const agentId = await createAgent();
    const page = await signedIn(problems);
    await page.goto(`${server.url}/console/agents/${agentId}/chat`);
    await attach(page, [
      { name: 'pixel.png', mimeType: 'image/png', buffer: PNG },
      { name: 'notes.txt', mimeType: 'text/plain', buffer: Buffer.from(NOTES) },
    ]);
    const chips = page.getByRole('list', { name: 'Attached files' });
    await chips.getByText('pixel.png').waitFor();
    await chips.getByText(`${NOTES.length} B`).waitFor();
    await expect.poll(() => chips.getByText('uploading…').count(), WAIT).toBe(0);
    await page.getByLabel('Message', { exact: true }).fill('summarise');
    await page.getByRole('button', { name: 'Send', exact: true }).click();

    const turn = page.locator('li.turn').first();
    await expect.poll(() => turn.getAttribute('data-status'), WAIT).toBe('completed');
    // The scripted model echoes what it read: the text file's content came with the message.
    await turn.locator('.reply').getByText(NOTES, { exact: false }).waitFor();
    const shown = turn.getByRole('list', { name: 'Attachments' });
    await shown.getByRole('img', { name: 'pixel.png' }).waitFor();
    await expect.poll(() => loaded(page), WAIT).toBe(true);
    await shown.getByText('notes.txt').waitFor();
    // Sent: the composer has no attachment left.
    expect(await page.getByRole('list', { name: 'Attached files' }).count()).toBe(0);
    expect(await seriousViolations(page), 'playground with attachments').toEqual([]);

    const sessionId = new URL(page.url()).searchParams.get('session') ?? '';
    const listed = await api('GET', `/v1/sessions/${sessionId}/messages`);
    expect(listed.body.data[0].parts.map((part: Json) => [part.type, part.filename ?? part.text])).toEqual([
      ['text', 'summarise'],
      ['image', 'pixel.png'],
      ['file', 'notes.txt'],
    ]);

    await page.reload();
    const again = page.locator('li.turn').first().getByRole('list', { name: 'Attachments' });
    await again.getByRole('img', { name: 'pixel.png' }).waitFor();
    await expect.poll(() => loaded(page), WAIT).toBe(true);
    await again.getByText('notes.txt').waitFor();
    expect(problems).toEqual([]);
  });

  it('says in words why a file is refused, at phone width, and sends once it is removed', async () => {
    const problems: string[] = [];
    const agentId = await createAgent();
    const page = await signedIn(problems, { width: 390, height: 844 });
    await page.goto(`${server.url}/console/agents/${agentId}/chat`);
    await attach(page, [
      { name: 'big.txt', mimeType: 'text/plain', buffer: Buffer.alloc(UPLOAD_LIMIT + 1, 'a') },
      { name: 'blob.bin', mimeType: 'application/octet-stream', buffer: Buffer.from([0, 1, 2, 3]) },
    ]);
    const chips = page.getByRole('list', { name: 'Attached files' });
    await expect
      .poll(() => chips.getByRole('alert').allTextContents(), WAIT)
      .toEqual([`big.txt is larger than the upload limit of ${UPLOAD_LIMIT} bytes`]);
    await chips.getByText(`big.txt is larger than the upload limit of ${UPLOAD_LIMIT} bytes`).waitFor();
    const send = page.getByRole('button', { name: 'Send', exact: true });
    await page.getByLabel('Message', { exact: true }).fill('look at this');
    // A refused upload has to go before the message can be sent.
    expect(await send.isDisabled()).toBe(true);
    await page.getByRole('button', { name: 'Remove big.txt' }).click();
    await expect.poll(() => send.isDisabled(), WAIT).toBe(false);
    await send.click();
    // No model can read the binary file: the send is refused, said at its chip.
    await chips.getByText('blob.bin: files of type application/octet-stream cannot be given to a model').waitFor();
    expect(await seriousViolations(page), 'composer with a refused file').toEqual([]);
    const [scrollWidth, innerWidth] = (await page.evaluate(
      '[document.scrollingElement.scrollWidth, innerWidth]',
    )) as number[];
    expect(scrollWidth).toBeLessThanOrEqual(innerWidth ?? 0);

    await page.getByRole('button', { name: 'Remove blob.bin' }).click();
    await send.click();
    const turn = page.locator('li.turn').first();
    await expect.poll(() => turn.getAttribute('data-status'), WAIT).toBe('completed');
    expect(await turn.getByRole('list', { name: 'Attachments' }).count()).toBe(0);
    expect(problems).toEqual([]);
  });
});
