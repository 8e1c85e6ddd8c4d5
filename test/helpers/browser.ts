/**
 * A real browser for the console tests: Debian's Chromium (`/usr/bin/chromium`, installed by the system's package
 * manager, never downloaded) driven by playwright-core, headless, with a fresh profile per launch and without the
 * background networking that this machine's closed network would refuse. Also: axe-core run inside a page, and
 * the page's own performance timings.
 */
import { existsSync, readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { type Browser, chromium, type Page } from 'playwright-core';
import { START_TIMEOUT_MS } from './deadlines.ts';

export const CHROMIUM = '/usr/bin/chromium';

export const CHROMIUM_ARGS = [
  '--no-sandbox',
  '--disable-gpu',
  '--disable-background-networking',
  '--disable-component-update',
  '--no-first-run',
  '--disable-sync',
  '--disable-quic',
];

export function chromiumAvailable(): boolean {
  return existsSync(CHROMIUM);
}

/** Launches Chromium; Playwright gives every launch a new temporary user-data-dir. */
export function launchChromium(): Promise<Browser> {
  return chromium.launch({ executablePath: CHROMIUM, headless: true, args: CHROMIUM_ARGS, timeout: START_TIMEOUT_MS });
}

const axeSource = readFileSync(createRequire(import.meta.url).resolve('axe-core/axe.min.js'), 'utf8');

export interface AxeViolation {
  id: string;
  impact: string | null;
  help: string;
  targets: string[];
}

/**
 * Runs axe-core on the page as it is now and returns its serious and critical violations. The script is
 * evaluated through the DevTools protocol, which the page's Content-Security-Policy does not govern, so the
 * console's strict policy stays on while it is checked. Page code is text: this Node.js project does not load the
 * DOM's types.
 */
export async function seriousViolations(page: Page): Promise<AxeViolation[]> {
  await page.evaluate(axeSource);
  const violations: AxeViolation[] = await page.evaluate(`axe.run(document).then((result) =>
    result.violations
      .filter((violation) => violation.impact === 'serious' || violation.impact === 'critical')
      .map((violation) => ({
        id: violation.id,
        impact: violation.impact,
        help: violation.help,
        targets: violation.nodes.map((node) => node.target.join(' ')),
      })))`);
  return violations;
}

/**
 * First contentful and largest contentful paint of the current document, in ms since navigation started. The
 * script is text: it runs in the page, whose DOM types this Node.js project does not load.
 */
export async function paintTimings(page: Page): Promise<{ fcp: number | null; lcp: number | null }> {
  // The paint entries are recorded once the frame is presented, which can be after the page's content is there:
  // both are observed (buffered entries arrive in a task of their own), for up to 5 s for the first paint.
  return page.evaluate(`new Promise((resolve) => {
    let fcp = null;
    let lcp = null;
    const lcpObserver = new PerformanceObserver((list) => {
      for (const entry of list.getEntries()) lcp = entry.startTime;
    });
    lcpObserver.observe({ type: 'largest-contentful-paint', buffered: true });
    const done = () => {
      paintObserver.disconnect();
      lcpObserver.disconnect();
      resolve({ fcp, lcp });
    };
    const giveUp = setTimeout(done, 5000);
    const paintObserver = new PerformanceObserver((list) => {
      for (const entry of list.getEntries()) {
        if (entry.name !== 'first-contentful-paint') continue;
        fcp = entry.startTime;
        clearTimeout(giveUp);
        setTimeout(done, 50);
      }
    });
    paintObserver.observe({ type: 'paint', buffered: true });
  })`);
}
