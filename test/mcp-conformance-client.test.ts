/**
 * The MCP conformance suite's client scenarios (`@modelcontextprotocol/conformance`, pinned in package.json), auth
 * suite included, with Agentry as the client: for each scenario the suite starts its test server and runs
 * test/helpers/conformance-client.ts, which drives a real Agentry server (listening on loopback) through its API:
 * connector, OAuth sign-in, tool list, tool call in a turn. Every scenario must pass except those listed in
 * ALLOWED_FAILURES, each with its reason (docs/mcp-auth.md carries the same table). Once per dialect.
 */
import { execFile } from 'node:child_process';
import { mkdtemp, readdir, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createHarness, dialects, type Harness } from './helpers/harness.ts';

const run = promisify(execFile);
const ROOT = path.resolve(import.meta.dirname, '..');
const CLI = path.join(ROOT, 'node_modules/@modelcontextprotocol/conformance/dist/index.js');
const DRIVER = path.join(ROOT, 'test/helpers/conformance-client.ts');
const PUBLIC = 'https://agentry.test';
/** A loaded machine takes several seconds per sign-in and turn; the suite's default is 30 s. */
const SCENARIO_TIMEOUT_MS = 120_000;
/** Scenarios run at once (each is a suite process, a test server and a driver process). */
const CONCURRENCY = 4;

/** Client scenarios Agentry does not pass yet, and why. Any other scenario must pass; a listed one must still fail. */
const ALLOWED_FAILURES: Record<string, string> = {
  'elicitation-sep1034-client-defaults':
    "an elicitation suspends the turn as a required action a person answers on the API (docs/mcp-auth.md); the scenario expects the client to accept at once within the call, filling in the schema's defaults (SEP-1034)",
  'auth/client-credentials-jwt':
    'extension: the client credentials grant (machine-to-machine, private_key_jwt) is not offered: connectors sign in a person with the authorization code flow',
  'auth/client-credentials-basic':
    'extension: the client credentials grant (client_secret_basic) is not offered: connectors sign in a person with the authorization code flow',
  'auth/cross-app-access-complete-flow':
    'extension: cross-app access (token exchange for an ID-JAG, then the JWT bearer grant) is not supported',
};

interface Check {
  id: string;
  status: string;
  description?: string;
  details?: unknown;
}

async function clientScenarios(): Promise<string[]> {
  const { stdout } = await run(process.execPath, [CLI, 'list']);
  const section = stdout.split('Client scenarios')[1] ?? '';
  return [...section.matchAll(/^\s+- (\S+)/gm)].map((match) => match[1] ?? '');
}

async function runScenario(scenario: string, env: Record<string, string>) {
  const out = await mkdtemp(path.join(tmpdir(), 'agentry-conformance-'));
  try {
    // The suite exits non-zero on any failure or warning; its checks say which.
    await run(
      process.execPath,
      [
        CLI,
        'client',
        '--command',
        `${process.execPath} ${DRIVER}`,
        '--scenario',
        scenario,
        '--timeout',
        String(SCENARIO_TIMEOUT_MS),
        '-o',
        out,
      ],
      { env: { ...process.env, ...env }, timeout: SCENARIO_TIMEOUT_MS + 30_000 },
    ).catch(() => undefined);
    // Results land in <out>/<scenario>-<time>/ (the auth scenarios' names hold a slash).
    const file = (await readdir(out, { recursive: true })).find((name) => name.endsWith('checks.json'));
    if (file === undefined) throw new Error(`${scenario}: the suite wrote no results`);
    const dir = path.dirname(path.join(out, file));
    const checks = JSON.parse(await readFile(path.join(dir, 'checks.json'), 'utf8')) as Check[];
    const stdout = await readFile(path.join(dir, 'stdout.txt'), 'utf8').catch(() => '');
    return { checks, stdout };
  } finally {
    await rm(out, { recursive: true, force: true });
  }
}

/**
 * Warnings that do not fail a scenario, and why: the rest do (a warning is a SHOULD the client missed).
 * `scenario/check id`.
 */
const ALLOWED_WARNINGS: Record<string, string> = {
  'auth/basic-cimd/cimd-client-id-used':
    "the suite expects its example client id; Agentry's is its own document, <AGENTRY_PUBLIC_URL>/v1/oauth/client-metadata.json",
  'sse-retry/client-sse-retry-timing':
    'reconnecting up to twice the retry delay late is a warning; a loaded test machine adds that much',
};

const failed = (scenario: string, checks: Check[]) =>
  checks.filter(
    (check) =>
      check.status === 'FAILURE' ||
      (check.status === 'WARNING' && ALLOWED_WARNINGS[`${scenario}/${check.id}`] === undefined),
  );

// One dialect: what the suite checks is the client's protocol; the credential vault's storage on both dialects is
// test/mcp-oauth.test.ts's (26 scenarios take minutes, run twice they crowd the suite's other files).
describe.each(dialects().slice(0, 1))('MCP conformance, Agentry as the client (%s)', (dialect) => {
  let h: Harness;
  let env: Record<string, string>;

  beforeAll(async () => {
    h = await createHarness(dialect, { AGENTRY_ALLOW_INSECURE_DESTINATIONS: 'true', AGENTRY_PUBLIC_URL: PUBLIC });
    env = {
      AGENTRY_CONFORMANCE_URL: await h.listen(),
      AGENTRY_CONFORMANCE_KEY: h.key,
      AGENTRY_CONFORMANCE_PUBLIC_URL: PUBLIC,
    };
  });
  afterAll(async () => {
    await h.close();
  });

  it('passes every client scenario of the pinned suite but the listed ones', { timeout: 900_000 }, async () => {
    const scenarios = await clientScenarios();
    expect(scenarios.length).toBeGreaterThan(20);
    const results: Record<string, string> = {};
    const queue = [...scenarios];
    const worker = async () => {
      for (let scenario = queue.shift(); scenario !== undefined; scenario = queue.shift()) {
        // A scenario that fails is run once more: on this shared machine a pooled keep-alive connection to the
        // suite's server can be closed under a tool call (docs/mcp-auth.md); a second failure is a failure.
        let result = '';
        for (let attempt = 0; attempt < 2 && result !== 'pass'; attempt++) {
          if (attempt > 0 && ALLOWED_FAILURES[scenario] !== undefined) break;
          const { checks, stdout } = await runScenario(scenario, env);
          const failures = failed(scenario, checks);
          result =
            failures.length === 0 && checks.length > 0
              ? 'pass'
              : `fail: ${failures.map((check) => `${check.id} ${JSON.stringify(check.details ?? check.description ?? '')}`).join(' | ')}\nclient: ${stdout}`;
        }
        results[scenario] = result;
      }
    };
    await Promise.all(Array.from({ length: CONCURRENCY }, worker));
    for (const scenario of scenarios) {
      const allowed = ALLOWED_FAILURES[scenario];
      if (allowed === undefined) expect(results[scenario], scenario).toBe('pass');
      else expect(results[scenario], `${scenario} passes now: remove it from ALLOWED_FAILURES`).not.toBe('pass');
    }
  });
});
