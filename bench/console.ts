/**
 * How fast the web console's sign-in page paints: an Agentry server (SQLite) and Debian's Chromium, headless, on
 * loopback; each round a fresh browser context (empty cache, as a first visit) opens `/console/agents`, which sends
 * it to the sign-in page, and reads the page's own first and largest contentful paint. Reported: the median over the
 * rounds of each (goal: under 1 s), with every round listed. A figure of the machine as much as of the console: the
 * test suite checks what the page does, this bench how fast. Needs /usr/bin/chromium; without it, it reports nothing.
 */
import { CONSOLE_DIR, ensureConsoleBuilt } from '../scripts/console-build.ts';
import { chromiumAvailable, launchChromium, paintTimings } from '../test/helpers/browser.ts';
import { startAgentry } from './agentry.ts';
import { type BenchResult, median, positiveInt, runStandalone, withCleanup } from './support.ts';

const PAINT_GOAL_MS = 1000;

function log(message: string): void {
  process.stderr.write(`[bench:console] ${message}\n`);
}

export async function runConsoleBench(): Promise<BenchResult[]> {
  if (!chromiumAvailable()) {
    log('skipped: /usr/bin/chromium is missing');
    return [];
  }
  const rounds = positiveInt('BENCH_CONSOLE_ROUNDS', 10);
  ensureConsoleBuilt((line) => log(line));
  log(`console build in ${CONSOLE_DIR}/dist; ${rounds} rounds`);
  return withCleanup(async (defer) => {
    const agentry = await startAgentry({ bench: 'console', mode: 'sqlite', logLevel: 'warn' }, defer);
    const browser = await launchChromium();
    defer(() => browser.close());
    const fcp: number[] = [];
    const lcp: number[] = [];
    // One round unmeasured: the server's first requests and the browser's first context warm up.
    for (let round = 0; round <= rounds; round++) {
      const context = await browser.newContext({ viewport: { width: 1200, height: 760 } });
      try {
        const page = await context.newPage();
        await page.goto(`${agentry.url}/console/agents`);
        await page.getByLabel('API key').waitFor();
        const timings = await paintTimings(page);
        if (timings.fcp === null) throw new Error('the sign-in page reported no first contentful paint');
        if (round === 0) continue;
        fcp.push(timings.fcp);
        lcp.push(timings.lcp ?? timings.fcp);
      } finally {
        await context.close();
      }
    }
    log(`first contentful paint ${fcp.map((ms) => ms.toFixed(0)).join(' ')} ms`);
    return [
      {
        name: 'console.sign_in.first_contentful_paint',
        value: median(fcp),
        unit: 'ms',
        goal: `value < ${PAINT_GOAL_MS}`,
        rounds: fcp,
      },
      {
        name: 'console.sign_in.largest_contentful_paint',
        value: median(lcp),
        unit: 'ms',
        goal: `value < ${PAINT_GOAL_MS}`,
        rounds: lcp,
      },
    ];
  });
}

if (import.meta.main) await runStandalone(runConsoleBench);
