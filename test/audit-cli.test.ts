/**
 * `agentry audit` (docs/audit-log.md) on both databases: the CLI's own changes (organization, key, credits, revoke)
 * are recorded as the CLI's, a change made over HTTP shows its key prefix and request id, filters narrow the table,
 * --json prints one entry per line, and no key ever appears in the output.
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createHarness, dialects, type Harness, json, testEnvironment } from './helpers/harness.ts';
import { runCli, startsTimeout } from './helpers/server-process.ts';

describe.each(dialects())('agentry audit (%s)', (dialect) => {
  let environment: ReturnType<typeof testEnvironment>;
  let h: Harness;

  beforeAll(async () => {
    environment = testEnvironment(dialect);
    h = await createHarness(dialect, environment.env);
  });
  afterAll(async () => {
    await h.close();
    await environment.cleanup();
  });

  it(
    'shows who changed what: the CLI, or a key with its request id',
    async () => {
      const cli = (...args: string[]) => runCli(args, environment.env);
      const org = `audited-${dialect}`;
      expect(cli('orgs', 'create', org).status).toBe(0);
      const created = cli('keys', 'create', '--org', org, '--scopes', 'agents:read');
      expect(created.status).toBe(0);
      const key = created.stdout.trim();
      expect(cli('credits', 'set', '--org', org, '7.5').status).toBe(0);
      expect(cli('keys', 'revoke', key.slice(0, 12)).status).toBe(0);

      const lines = cli('audit', '--org', org, '--json');
      expect(lines.status, lines.stderr).toBe(0);
      const entries = lines.stdout
        .trim()
        .split('\n')
        .map((line) => JSON.parse(line));
      expect(entries.map((entry) => [entry.action, entry.actor.type, entry.org])).toEqual([
        ['api_key.revoked', 'cli', org],
        ['credits.set', 'cli', org],
        ['api_key.created', 'cli', org],
        ['organization.created', 'cli', org],
      ]);
      expect(entries[1].after).toEqual({ credit_balance_usd: 7.5 });
      expect(lines.stdout).not.toContain(key);
      expect(lines.stdout).toContain(key.slice(0, 12));

      // A change over HTTP, in the default organization: its key's prefix and request id.
      const agent = json(await h.request('GET', '/v1/agents')).data[0];
      const patched = await h.request('PATCH', `/v1/agents/${agent.id}`, {
        body: { instructions: 'Audited.' },
        headers: { 'x-request-id': 'cli-audit-req-1' },
      });
      expect(patched.status, patched.text).toBe(200);
      const table = cli('audit', '--org', 'default', '--action', 'agent');
      expect(table.status, table.stderr).toBe(0);
      const [header, row, ...rest] = table.stdout.trim().split('\n');
      expect(header).toMatch(/^TIME\s+ACTOR\s+ACTION\s+TARGET\s+REQUEST\s+CHANGES$/);
      expect(rest).toEqual([]);
      expect(row).toContain(h.key.slice(0, 12));
      expect(row).toContain('agent.updated');
      expect(row).toContain(`agent ${agent.id}`);
      expect(row).toContain('cli-audit-req-1');
      expect(row).toMatch(/instructions$/);
      expect(table.stdout).not.toContain(h.key);

      // Every organization's, with the organization named; filters by actor and time.
      const everyone = cli('audit', '--actor', 'cli', '--since', '1h');
      expect(everyone.stdout.split('\n')[0]).toMatch(/^TIME\s+ORG\s+ACTOR/);
      expect(everyone.stdout).toContain(org);
      expect(everyone.stdout).not.toContain('agent.updated');
      expect(everyone.stdout).toContain('organization.created');
      const future = cli('audit', '--since', '2999-01-01', '--json');
      expect(future.status).toBe(0);
      expect(future.stdout).toBe('');
      const limited = cli('audit', '--org', org, '--limit', '2', '--json');
      expect(limited.stdout.trim().split('\n')).toHaveLength(2);
      // agentry apply: each agent it creates is recorded as the CLI's.
      const dir = mkdtempSync(join(tmpdir(), 'agentry-audit-apply-'));
      try {
        writeFileSync(join(dir, 'helper.agent.yaml'), 'kind: agent\nname: from-yaml\ninstructions: Help.\n');
        const applied = cli('apply', '--org', org, '-f', dir);
        expect(applied.status, applied.stderr).toBe(0);
      } finally {
        rmSync(dir, { recursive: true, force: true });
      }
      const [appliedEntry] = cli('audit', '--org', org, '--action', 'agent.applied', '--json')
        .stdout.trim()
        .split('\n')
        .map((line) => JSON.parse(line));
      expect(appliedEntry).toMatchObject({ actor: { type: 'cli' }, request_id: null, after: { name: 'from-yaml' } });

      const unknown = cli('audit', '--org', 'nobody');
      expect(unknown.status).toBe(1);
      expect(unknown.stderr).toContain('nobody');
    },
    startsTimeout(10),
  );
});
