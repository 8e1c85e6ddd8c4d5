/**
 * Agents as code from the command line and GET /v1/export, once per dialect: `agentry export` writes one YAML file
 * per agent, the lock and the JSON Schema (which validates the files); `agentry apply -f` of that folder changes
 * nothing, plans and applies an edit, refuses an agent changed since the lock unless --force, names the file and
 * field of an invalid document, and reproduces the agents in another organization.
 */
import { mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Ajv } from 'ajv';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parse, parseAllDocuments } from 'yaml';
import { agentDocumentSchema } from '../src/cli/agents-as-code.ts';
import type { Json } from './helpers/fixtures.ts';
import { createHarness, dialects, type Harness, json } from './helpers/harness.ts';
import { runCli } from './helpers/server-process.ts';

const AGENTS: Json[] = [
  {
    name: 'Support Desk',
    description: 'Answers customers',
    instructions: 'Be brief.\nNever guess.',
    maxSteps: 8,
    clientTools: [
      {
        type: 'function',
        name: 'lookup_order',
        description: 'Finds an order',
        parameters: {
          type: 'object',
          properties: { id: { type: 'string' } },
          required: ['id'],
          additionalProperties: false,
        },
        strict: true,
      },
    ],
    toolApprovals: { default: 'always_ask', overrides: {} },
    outputFormat: {
      type: 'json_schema',
      name: 'answer',
      schema: { type: 'object', properties: { text: { type: 'string' } }, required: ['text'] },
      strict: false,
    },
  },
  { name: 'triage', model: 'scripted', mcpServers: [{ kind: 'internal', name: 'memory' }], compactThreshold: 5_000 },
];

describe.each(dialects())('agents as code on the command line (%s)', (dialect) => {
  let h: Harness;
  let env: Record<string, string>;
  let dir: string;
  let other: { orgId: string; key: string };

  beforeAll(async () => {
    h = await createHarness(dialect);
    const { config } = h.deps;
    env = {
      AGENTRY_DATA_DIR: config.dataDir,
      ...(config.databaseUrl === null ? {} : { DATABASE_URL: config.databaseUrl }),
      ...(config.databaseSchema === null ? {} : { AGENTRY_DATABASE_SCHEMA: config.databaseSchema }),
    };
    for (const agent of AGENTS) {
      const created = await h.request('POST', '/v1/agents', { body: agent });
      expect(created.status, created.text).toBe(201);
    }
    other = await h.createOrg(`elsewhere-${dialect}`);
    dir = mkdtempSync(join(tmpdir(), 'agentry-agents-'));
  });
  afterAll(async () => {
    rmSync(dir, { recursive: true, force: true });
    await h.close();
  });

  const cli = (...args: string[]) => runCli(args, env);
  const agentsOf = async (key?: string) =>
    json(await h.request('GET', '/v1/agents', key === undefined ? {} : { key })).data as Json[];

  it('GET /v1/export answers documents that POST /v1/apply finds unchanged', async () => {
    const exported = json(await h.request('GET', '/v1/export'));
    const names = exported.documents.map((document: Json) => document.name);
    expect(names).toEqual(expect.arrayContaining(['Support Desk', 'triage']));
    expect(exported.documents.find((d: Json) => d.name === 'Support Desk')).toMatchObject({
      kind: 'agent',
      description: 'Answers customers',
      outputFormat: { type: 'json_schema', name: 'answer' },
    });
    const applied = json(await h.request('POST', '/v1/apply', { body: { ...exported, dry_run: true } }));
    expect(applied.plan.map((p: Json) => p.action)).toEqual(names.map(() => 'unchanged'));
    expect((await h.request('GET', '/v1/export', { key: null })).status).toBe(401);
  });

  it('exports YAML files, a lock and a schema that validates them; applying them back changes nothing', async () => {
    const exported = cli('export', '--org', 'default', '--out', dir);
    expect(exported.status, exported.stderr).toBe(0);
    expect(exported.stdout).toMatch(/^exported \d+ agents to /);
    const files = readdirSync(dir).sort();
    expect(files).toEqual(expect.arrayContaining(['support-desk.agent.yaml', 'triage.agent.yaml']));
    expect(files).toContain('agentry.lock.json');
    const lock = JSON.parse(readFileSync(join(dir, 'agentry.lock.json'), 'utf8'));
    expect(lock.agents).toMatchObject({ 'Support Desk': 1, triage: 1 });
    const text = readFileSync(join(dir, 'support-desk.agent.yaml'), 'utf8');
    expect(text.startsWith('# yaml-language-server: $schema=agent-document.schema.json\n')).toBe(true);
    const validate = new Ajv({ strict: false }).compile(
      JSON.parse(readFileSync(join(dir, 'agent-document.schema.json'), 'utf8')),
    );
    for (const file of files.filter((name) => name.endsWith('.yaml'))) {
      const document = parse(readFileSync(join(dir, file), 'utf8'));
      expect(validate(document), `${file}: ${JSON.stringify(validate.errors)}`).toBe(true);
    }
    expect(validate({ kind: 'agent', name: 'x', maxSteps: 1000 })).toBe(false);

    const applied = cli('apply', '--org', 'default', '-f', dir);
    expect(applied.status, applied.stderr).toBe(0);
    expect(applied.stdout).toContain('unchanged agent "Support Desk" (version 1)');
    expect(applied.stdout).not.toMatch(/update|create/);
  });

  it('plans an edit with --dry-run, applies it, and keeps the new version in the lock', async () => {
    const file = join(dir, 'support-desk.agent.yaml');
    writeFileSync(file, readFileSync(file, 'utf8').replace('maxSteps: 8', 'maxSteps: 12'));
    const planned = cli('apply', '--org', 'default', '-f', dir, '--dry-run');
    expect(planned.status, planned.stderr).toBe(0);
    expect(planned.stdout).toContain('would update agent "Support Desk" (version 1): /maxSteps');
    const support = (await agentsOf()).find((agent) => agent.name === 'Support Desk');
    expect(support).toMatchObject({ maxSteps: 8, version: 1 });

    const applied = cli('apply', '--org', 'default', '-f', dir);
    expect(applied.status, applied.stderr).toBe(0);
    expect(applied.stdout).toContain('updated agent "Support Desk" to version 2: /maxSteps');
    expect((await agentsOf()).find((agent) => agent.name === 'Support Desk')).toMatchObject({ maxSteps: 12 });
    expect(JSON.parse(readFileSync(join(dir, 'agentry.lock.json'), 'utf8')).agents['Support Desk']).toBe(2);
    const version = json(await h.request('GET', `/v1/agents/${support?.id}/versions/2`));
    expect(version.actor).toBe('cli');
  });

  it('refuses an agent changed since the lock unless --force', async () => {
    const triage = (await agentsOf()).find((agent) => agent.name === 'triage');
    await h.request('PATCH', `/v1/agents/${triage?.id}`, { body: { instructions: 'Changed in the console.' } });
    const refused = cli('apply', '--org', 'default', '-f', dir);
    expect(refused.status).toBe(1);
    expect(refused.stderr).toContain('changed since the last apply: "triage"');
    const forced = cli('apply', '--org', 'default', '-f', dir, '--force');
    expect(forced.status, forced.stderr).toBe(0);
    expect(forced.stdout).toContain('updated agent "triage" to version 3: /instructions');
  });

  it('names the file and the field of an invalid document, and writes nothing', async () => {
    const bad = join(dir, 'zz-bad.yaml');
    writeFileSync(bad, 'kind: agent\nname: broken\n---\nkind: agent\nname: worse\nmaxSteps: 1000\n');
    try {
      const refused = cli('apply', '--org', 'default', '-f', dir);
      expect(refused.status).toBe(1);
      expect(refused.stderr).toContain(`${bad} (document 2): maxSteps must be <= 128`);
      expect((await agentsOf()).some((agent) => agent.name === 'broken')).toBe(false);
      writeFileSync(bad, 'kind: agent\nname: [unclosed\n');
      const unparsable = cli('apply', '--org', 'default', '-f', bad);
      expect(unparsable.status).toBe(1);
      expect(unparsable.stderr).toContain(bad);
    } finally {
      rmSync(bad);
    }
    const usage = cli('apply', '--org', 'default');
    expect(usage.status).toBe(2);
    expect(usage.stderr).toContain('--file is required');
    expect(cli('export', '--org', 'default', '--out', dir, '--force').status).toBe(2);
  });

  it('reproduces the agents in another organization', async () => {
    const target = mkdtempSync(join(tmpdir(), 'agentry-copy-'));
    try {
      for (const file of readdirSync(dir).filter((name) => name.endsWith('.yaml'))) {
        writeFileSync(join(target, file), readFileSync(join(dir, file)));
      }
      const created = cli('apply', '--org', `elsewhere-${dialect}`, '-f', target);
      expect(created.status, created.stderr).toBe(0);
      expect(created.stdout).toContain('created agent "Support Desk"');
      const mine = json(await h.request('GET', '/v1/export')).documents as Json[];
      const theirs = json(await h.request('GET', '/v1/export', { key: other.key })).documents as Json[];
      for (const name of ['Support Desk', 'triage']) {
        expect(theirs.find((d) => d.name === name)).toEqual(mine.find((d) => d.name === name));
      }
      const again = cli('apply', '--org', `elsewhere-${dialect}`, '-f', target);
      expect(again.stdout).not.toMatch(/created|updated/);
    } finally {
      rmSync(target, { recursive: true, force: true });
    }
  });

  it('publishes the schema in docs/agent-document.schema.json (npm run docs:schemas)', () => {
    const published = JSON.parse(
      readFileSync(join(import.meta.dirname, '..', 'docs', 'agent-document.schema.json'), 'utf8'),
    );
    expect(published).toEqual(agentDocumentSchema());
    expect(parseAllDocuments('a: 1').length).toBe(1);
  });
});
