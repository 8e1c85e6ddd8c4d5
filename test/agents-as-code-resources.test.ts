/**
 * Agents as code for MCP connectors, schedules and webhook endpoints, over the API, once per dialect: an export
 * carries no secret (connector secrets become ${NAME} references); applied into a fresh server with the secrets,
 * it reproduces the resources (the connector lists the tools of a server that checks its header; the schedule
 * names the new server's agent; the endpoint gets a new signing secret shown once); applying twice changes
 * nothing; dry_run writes nothing; a resource changed through the API since the lock is refused unless forced,
 * named in the refusal; a schedule naming an unknown agent is a 400 naming the field; changes reach the audit log.
 * The command line writes a file per resource without secrets and applies them with secrets from its environment.
 */
import { mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parse as parseYaml, stringify as stringifyYaml } from 'yaml';
import type { Json } from './helpers/fixtures.ts';
import { createHarness, dialects, type Harness, json } from './helpers/harness.ts';
import { type McpTestServer, startModernMcpServer } from './helpers/mcp-servers.ts';
import { runCli } from './helpers/server-process.ts';

const HEADER_SECRET = 'Bearer header-s3cret-value';
const CLIENT_SECRET = 'client-s3cret-value';
const INSECURE = { AGENTRY_ALLOW_INSECURE_DESTINATIONS: 'true' };
const SECRETS = { MCP_TOOLS_AUTHORIZATION: HEADER_SECRET, MCP_SIGN_IN_CLIENT_SECRET: CLIENT_SECRET };

describe.each(dialects())('agents as code: connectors, schedules, webhook endpoints (%s)', (dialect) => {
  let server: McpTestServer;
  let h: Harness;
  let fresh: Harness;
  /** The export of `h` once its resources exist. */
  let exported: Json;

  const apply = (target: Harness, body: Json) => target.request('POST', '/v1/apply', { body });
  const list = async (target: Harness, path: string) => json(await target.request('GET', path)).data as Json[];
  const byKind = (documents: Json[], kind: string) => documents.filter((document) => document.kind === kind);
  /** The value, which the test expects to be there. */
  const present = <T>(value: T | undefined): T => {
    expect(value).toBeDefined();
    return value as T;
  };
  const summary = (plan: Json[]) => plan.map((p) => `${p.kind} ${p.name} ${p.action}`);

  beforeAll(async () => {
    server = await startModernMcpServer({ name: 'tools', auth: HEADER_SECRET });
    [h, fresh] = await Promise.all([createHarness(dialect, INSECURE), createHarness(dialect, INSECURE)]);
    const created = async (path: string, body: Json) => {
      const response = await h.request('POST', path, { body });
      expect([200, 201], response.text).toContain(response.status);
      return json(response);
    };
    const tools = await created('/v1/mcp_servers', {
      name: 'tools',
      url: server.url,
      headers: { Authorization: HEADER_SECRET },
    });
    await created('/v1/mcp_servers', {
      name: 'sign in',
      url: 'https://mcp.example.com/mcp',
      oauth: { client_id: 'agentry-client', client_secret: CLIENT_SECRET, scope: 'read write' },
    });
    const agent = (
      await created('/v1/agents', {
        name: 'reporter',
        instructions: 'Report.',
        maxSteps: 6,
        mcpServers: [{ kind: 'custom', serverId: tools.id }],
      })
    ).agent;
    await created('/v1/schedules', {
      name: 'nightly',
      agent_id: agent.id,
      input: 'Write the nightly report',
      cron: '0 3 * * *',
      timezone: 'Europe/Berlin',
      overlap: 'queue',
    });
    await created('/v1/webhook_endpoints', {
      name: 'ops',
      url: 'https://hooks.example.com/agentry',
      event_types: ['agent.session.failed', 'agent.session.idle'],
    });
    const response = await h.request('GET', '/v1/export');
    expect(response.status, response.text).toBe(200);
    exported = json(response);
  });
  afterAll(async () => {
    await Promise.all([h.close(), fresh.close(), server.close()]);
  });

  it('exports every kind without its secrets, and applying the export back changes nothing', async () => {
    const text = JSON.stringify(exported);
    for (const secret of ['header-s3cret-value', CLIENT_SECRET, 'whsec_']) expect(text).not.toContain(secret);
    expect(byKind(exported.documents, 'mcp_server')).toEqual([
      { kind: 'mcp_server', name: 'tools', url: server.url, headers: { Authorization: `\${MCP_TOOLS_AUTHORIZATION}` } },
      {
        kind: 'mcp_server',
        name: 'sign in',
        url: 'https://mcp.example.com/mcp',
        oauth: { client_id: 'agentry-client', client_secret: `\${MCP_SIGN_IN_CLIENT_SECRET}`, scope: 'read write' },
      },
    ]);
    expect(byKind(exported.documents, 'schedule')).toEqual([
      {
        kind: 'schedule',
        name: 'nightly',
        agent: 'reporter',
        input: 'Write the nightly report',
        cron: '0 3 * * *',
        timezone: 'Europe/Berlin',
        overlap: 'queue',
        catch_up: 'skip',
        enabled: true,
      },
    ]);
    expect(byKind(exported.documents, 'webhook_endpoint')).toEqual([
      {
        kind: 'webhook_endpoint',
        name: 'ops',
        url: 'https://hooks.example.com/agentry',
        event_types: ['agent.session.failed', 'agent.session.idle'],
      },
    ]);
    // The agent names its connector by name, so that the document applies in another organization.
    expect(byKind(exported.documents, 'agent').find((d) => d.name === 'reporter')?.mcpServers).toEqual([
      { kind: 'custom', server: 'tools' },
    ]);
    expect(Object.keys(exported.lock).sort()).toEqual(['agents', 'mcp_servers', 'schedules', 'webhook_endpoints']);
    expect(exported.lock.schedules.nightly).toMatch(/^sha256:[0-9a-f]{32}$/);

    // No secret given: references keep the stored values, so nothing changes.
    const again = await apply(h, { documents: exported.documents, lock: exported.lock });
    expect(again.status, again.text).toBe(200);
    expect(json(again).plan.every((p: Json) => p.action === 'unchanged')).toBe(true);
    expect(json(again).lock).toEqual(exported.lock);
    // The same secrets as stored change nothing either; another value is an update of that header only.
    const same = json(await apply(h, { documents: exported.documents, lock: exported.lock, secrets: SECRETS }));
    expect(same.plan.every((p: Json) => p.action === 'unchanged')).toBe(true);
    const other = await apply(h, {
      documents: exported.documents,
      dry_run: true,
      secrets: { ...SECRETS, MCP_TOOLS_AUTHORIZATION: 'Bearer another' },
    });
    expect(json(other).plan.find((p: Json) => p.name === 'tools')).toMatchObject({
      action: 'update',
      changes: ['/headers/Authorization'],
    });
    expect(JSON.stringify(json(other))).not.toContain('Bearer another');
  });

  it('reproduces the resources in a fresh server: dry-run first, secrets from the request, twice = no change', async () => {
    // A fresh server has its own default agent: the documents of what this test made are the ones to reproduce.
    const own = (documents: Json[]) => documents.filter((d) => d.kind !== 'agent' || d.name === 'reporter');
    const documents = own(exported.documents);
    const missing = await apply(fresh, { documents });
    expect(missing.status, missing.text).toBe(400);
    expect(json(missing).error.param).toBe('documents[0].headers.Authorization');
    expect(json(missing).error.message).toContain(`\${MCP_TOOLS_AUTHORIZATION}`);

    const dry = await apply(fresh, { documents, dry_run: true, secrets: SECRETS });
    expect(dry.status, dry.text).toBe(200);
    expect(json(dry).plan.every((p: Json) => p.action === 'create')).toBe(true);
    expect(await list(fresh, '/v1/mcp_servers')).toEqual([]);
    expect(await list(fresh, '/v1/schedules')).toEqual([]);
    expect(await list(fresh, '/v1/webhook_endpoints')).toEqual([]);
    expect((await list(fresh, '/v1/agents')).map((agent) => agent.name)).not.toContain('reporter');

    const applied = await apply(fresh, { documents, secrets: SECRETS });
    expect(applied.status, applied.text).toBe(200);
    const result = json(applied);
    expect(summary(result.plan)).toEqual(documents.map((d: Json) => `${d.kind} ${d.name} create`));
    const endpointLine = result.plan.find((p: Json) => p.kind === 'webhook_endpoint');
    expect(endpointLine.signing_secret).toMatch(/^whsec_[A-Za-z0-9+/=]+$/);
    expect(endpointLine.id).toMatch(/^we_/);

    const connectors = await list(fresh, '/v1/mcp_servers');
    const tools = present(connectors.find((c) => c.name === 'tools'));
    // The server answers only with the header's value: its tools were listed with the secret supplied.
    expect(tools.header_names).toEqual(['Authorization']);
    expect(tools.tools.length).toBeGreaterThan(0);
    expect(present(connectors.find((c) => c.name === 'sign in')).oauth).toMatchObject({
      client_id: 'agentry-client',
      scope: 'read write',
    });
    const reporter = present((await list(fresh, '/v1/agents')).find((agent) => agent.name === 'reporter'));
    // The connector named by name is the fresh server's own, created by the same apply.
    expect(reporter.mcpServers).toEqual([{ kind: 'custom', serverId: tools.id }]);
    const [schedule] = await list(fresh, '/v1/schedules');
    expect(schedule).toMatchObject({ name: 'nightly', agent_id: reporter.id, cron: '0 3 * * *', overlap: 'queue' });
    const endpoint = present((await list(fresh, '/v1/webhook_endpoints'))[0]);
    expect(endpoint).toMatchObject({ name: 'ops', url: 'https://hooks.example.com/agentry' });
    expect(endpoint.signing_secret_hint.endsWith(endpointLine.signing_secret.slice(-4))).toBe(true);

    // The fresh server exports the same documents; applying them again is an empty plan.
    const reexported = json(await fresh.request('GET', '/v1/export'));
    expect(own(reexported.documents)).toEqual(documents);
    const twice = json(await apply(fresh, { documents, lock: result.lock }));
    expect(twice.plan.every((p: Json) => p.action === 'unchanged')).toBe(true);
    expect(twice.lock).toEqual(result.lock);
    expect(JSON.stringify(reexported)).not.toContain(CLIENT_SECRET);
    expect(JSON.stringify(reexported)).not.toContain(endpointLine.signing_secret);

    // Each change was written like any other: in the audit log, with the key that applied it, no secret in it.
    const audit = await fresh.request('GET', '/v1/audit_log?limit=100');
    expect(audit.status, audit.text).toBe(200);
    const actions = json(audit).data.map((entry: Json) => entry.action);
    for (const action of ['mcp_server.created', 'agent.applied', 'schedule.created', 'webhook_endpoint.created']) {
      expect(actions).toContain(action);
    }
    expect(audit.text).not.toContain('header-s3cret-value');
    expect(audit.text).not.toContain(CLIENT_SECRET);
  });

  it('refuses resources changed through the API since the lock, naming them, unless forced', async () => {
    const { documents, lock } = exported;
    const schedule = present((await list(h, '/v1/schedules'))[0]);
    const endpoint = present((await list(h, '/v1/webhook_endpoints'))[0]);
    const tools = present((await list(h, '/v1/mcp_servers')).find((c) => c.name === 'tools'));
    const edit = async (path: string, body: Json) => {
      const response = await h.request('POST', path, { body });
      expect(response.status, response.text).toBe(200);
    };
    await edit(`/v1/schedules/${schedule.id}`, { input: 'Changed by hand' });
    await edit(`/v1/webhook_endpoints/${endpoint.id}`, { event_types: ['agent.session.failed'] });
    // A new header value is a change too, though a document never shows it. The lock sees it through the
    // connector's updated_at, which the API keeps in whole seconds: a change within the second of the export is not
    // seen (docs/agents-as-code.md), so this one is made in the next second.
    await new Promise((resolve) => setTimeout(resolve, 1_100));
    await edit(`/v1/mcp_servers/${tools.id}`, { headers: { Authorization: HEADER_SECRET } });

    const refused = await apply(h, { documents, lock });
    expect(refused.status, refused.text).toBe(409);
    const error = json(refused).error;
    expect(error.code).toBe('version_conflict');
    expect(error.message).toContain('schedule "nightly"');
    expect(error.message).toContain('webhook endpoint "ops"');
    expect(error.message).toContain('mcp server "tools"');
    expect(Object.keys(error.details).sort()).toEqual(['mcp_servers', 'schedules', 'webhook_endpoints']);
    expect(error.details.schedules.nightly.locked).toBe(lock.schedules.nightly);
    expect((await h.request('GET', `/v1/schedules/${schedule.id}`)).text).toContain('Changed by hand');

    // A dry run is never refused: it shows what an apply would put back, and writes nothing.
    const dry = json(await apply(h, { documents, lock, dry_run: true }));
    expect(dry.plan.find((p: Json) => p.kind === 'schedule')).toMatchObject({ action: 'update', changes: ['/input'] });
    expect(dry.plan.find((p: Json) => p.kind === 'webhook_endpoint')).toMatchObject({
      action: 'update',
      changes: ['/event_types'],
    });
    expect(json(await h.request('GET', `/v1/schedules/${schedule.id}`)).input).toBe('Changed by hand');

    const forced = await apply(h, { documents, lock, force: true });
    expect(forced.status, forced.text).toBe(200);
    expect(json(await h.request('GET', `/v1/schedules/${schedule.id}`)).input).toBe('Write the nightly report');
    const after = present((await list(h, '/v1/webhook_endpoints'))[0]);
    expect(after.event_types).toEqual(['agent.session.failed', 'agent.session.idle']);
    const next = json(await apply(h, { documents, lock: json(forced).lock }));
    expect(next.plan.every((p: Json) => p.action === 'unchanged')).toBe(true);
  });

  it('answers 400 naming the field for a schedule of an unknown agent, writing nothing', async () => {
    const documents = [
      {
        kind: 'webhook_endpoint',
        name: 'early',
        url: 'https://hooks.example.com/early',
        event_types: ['schedule.run.failed'],
      },
      { kind: 'schedule', name: 'orphan', agent: 'nobody', input: 'Hello', interval_seconds: 3600 },
    ];
    const response = await apply(h, { documents });
    expect(response.status, response.text).toBe(400);
    expect(json(response).error.param).toBe('documents[1].agent');
    expect((await list(h, '/v1/webhook_endpoints')).map((e) => e.name)).not.toContain('early');
    // The agent may come from the same apply: it is created first.
    const together = await apply(h, {
      documents: [documents[1], { kind: 'agent', name: 'nobody', instructions: 'Reply.' }],
    });
    expect(together.status, together.text).toBe(200);
    expect(summary(json(together).plan)).toEqual(['schedule orphan create', 'agent nobody create']);
    const twice = await apply(h, { documents: [{ ...documents[1] }, { ...documents[1] }] });
    expect(json(twice).error.param).toBe('documents[1].name');
    const bad = await apply(h, {
      documents: [{ ...documents[1], agent: 'reporter', interval_seconds: undefined, cron: 'every day' }],
    });
    expect(bad.status, bad.text).toBe(400);
    expect(json(bad).error.param).toBe('documents[0].cron');
    // So is an agent naming a connector the organization does not have, nor the apply creates.
    const unknown = await apply(h, {
      documents: [
        {
          kind: 'agent',
          name: 'lost',
          mcpServers: [
            { kind: 'internal', name: 'skills' },
            { kind: 'custom', server: 'nowhere' },
          ],
        },
      ],
    });
    expect(unknown.status, unknown.text).toBe(400);
    expect(json(unknown).error.param).toBe('documents[0].mcpServers[1].server');
    expect((await list(h, '/v1/agents')).map((agent) => agent.name)).not.toContain('lost');
  });

  it('exports a file per resource from the command line and applies them with secrets from the environment', async () => {
    const { config } = h.deps;
    const env = {
      ...INSECURE,
      AGENTRY_DATA_DIR: config.dataDir,
      ...(config.databaseUrl === null ? {} : { DATABASE_URL: config.databaseUrl }),
      ...(config.databaseSchema === null ? {} : { AGENTRY_DATABASE_SCHEMA: config.databaseSchema }),
    };
    const org = `cli-${dialect}`;
    await h.createOrg(org);
    const dir = mkdtempSync(join(tmpdir(), 'agentry-resources-'));
    const target = mkdtempSync(join(tmpdir(), 'agentry-resources-copy-'));
    try {
      const exported = runCli(['export', '--org', 'default', '--out', dir], env);
      expect(exported.status, exported.stderr).toBe(0);
      const files = readdirSync(dir);
      for (const file of ['tools.mcp-server.yaml', 'sign-in.mcp-server.yaml', 'nightly.schedule.yaml']) {
        expect(files).toContain(file);
      }
      expect(files).toContain('ops.webhook-endpoint.yaml');
      for (const file of files) {
        const text = readFileSync(join(dir, file), 'utf8');
        for (const secret of ['header-s3cret-value', CLIENT_SECRET, 'whsec_']) expect(text).not.toContain(secret);
      }
      // The connector that signs in is listed only once connected: nothing to reach while the test waits. The other
      // one is left out (a command's process lists its tools on create, tested over HTTP above), and so is the
      // agent's entry naming it.
      for (const file of [
        'sign-in.mcp-server.yaml',
        'reporter.agent.yaml',
        'nightly.schedule.yaml',
        'ops.webhook-endpoint.yaml',
      ]) {
        writeFileSync(join(target, file), readFileSync(join(dir, file)));
      }
      const agentFile = join(target, 'reporter.agent.yaml');
      const agentDocument = parseYaml(readFileSync(agentFile, 'utf8'));
      expect(agentDocument.mcpServers).toEqual([{ kind: 'custom', server: 'tools' }]);
      writeFileSync(agentFile, stringifyYaml({ ...agentDocument, mcpServers: [] }));
      const withoutSecret = runCli(['apply', '--org', org, '-f', target], env);
      expect(withoutSecret.status).toBe(1);
      expect(withoutSecret.stderr).toContain('sign-in.mcp-server.yaml: oauth.client_secret references');

      const applied = runCli(['apply', '--org', org, '-f', target], { ...env, MCP_SIGN_IN_CLIENT_SECRET: 'other' });
      expect(applied.status, applied.stderr).toBe(0);
      expect(applied.stdout).toContain('created mcp server "sign in"');
      expect(applied.stdout).toContain('created schedule "nightly"');
      expect(applied.stdout).toMatch(/created webhook endpoint "ops"\n {2}signing secret \(shown only now\): whsec_/);
      const lock = JSON.parse(readFileSync(join(target, 'agentry.lock.json'), 'utf8'));
      expect(Object.keys(lock.schedules)).toEqual(['nightly']);

      const again = runCli(['apply', '--org', org, '-f', target], env);
      expect(again.status, again.stderr).toBe(0);
      expect(
        again.stdout
          .trim()
          .split('\n')
          .every((line) => line.startsWith('unchanged ')),
      ).toBe(true);
    } finally {
      rmSync(dir, { recursive: true, force: true });
      rmSync(target, { recursive: true, force: true });
    }
  });
});
