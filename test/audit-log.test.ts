/**
 * The audit log (docs/audit-log.md) over real HTTP on both databases: every family of change (agents with the fields
 * changed, apply, restore, connectors, webhook endpoints and their secret rotation, legacy webhooks, schedules and
 * their pause, memories, tool approvals, keys, credits and organizations) appends its entry with the right actor and
 * request id; no secret reaches the table (the raw rows are searched for every secret the test made); organizations
 * are kept apart; filters, paging and scopes; bad input is a 400 naming the field; no route edits or deletes an entry.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { REDACTED, redact } from '../src/domain/audit/audit-log.ts';
import { flows, type Json, waitUntil } from './helpers/fixtures.ts';
import { createHarness, dialects, type Harness } from './helpers/harness.ts';
import { type McpTestServer, startModernMcpServer } from './helpers/mcp-servers.ts';

interface Answer {
  status: number;
  body: Json;
  requestId: string | null;
}

const ADMIN_TOKEN = 'audit-test-admin-token-0123456789';

describe.each(dialects())('audit log (%s)', (dialect) => {
  let h: Harness;
  let base: string;
  let mcp: McpTestServer;
  let keyPrefix: string;
  let keyId: string;
  /** Every secret value the test hands the server or is handed back: none may be in the audit table. */
  const secrets: string[] = [];
  const flow = flows(() => h, { agentName: 'audited' });
  let requestCounter = 0;

  /** A request over loopback HTTP with its own x-request-id. */
  async function call(method: string, path: string, body?: Json, key?: string): Promise<Answer> {
    requestCounter += 1;
    const requestId = `audit-test-${dialect}-${requestCounter}`;
    const response = await fetch(`${base}${path}`, {
      method,
      headers: {
        authorization: `Bearer ${key ?? h.key}`,
        'x-request-id': requestId,
        ...(body === undefined ? {} : { 'content-type': 'application/json' }),
      },
      ...(body === undefined ? {} : { body: JSON.stringify(body) }),
    });
    const text = await response.text();
    return {
      status: response.status,
      body: text === '' ? {} : (JSON.parse(text) as Json),
      requestId: response.headers.get('x-request-id'),
    };
  }

  async function log(query = '', key?: string): Promise<Json[]> {
    const answer = await call('GET', `/v1/audit_log?limit=100${query === '' ? '' : `&${query}`}`, undefined, key);
    expect(answer.status, JSON.stringify(answer.body)).toBe(200);
    return answer.body.data;
  }

  /** The newest entry of `action` on `targetId`; fails when there is none. */
  async function entryOf(action: string, targetId: string): Promise<Json> {
    const [entry] = await log(`action=${action}&target_id=${encodeURIComponent(targetId)}`);
    expect(entry, `${action} on ${targetId}`).toBeDefined();
    return entry ?? {};
  }

  const byKey = (requestId: string | null) => ({
    actor: { type: 'api_key', api_key_id: keyId, api_key_prefix: keyPrefix },
    request_id: requestId,
  });

  beforeAll(async () => {
    mcp = await startModernMcpServer({ name: 'ops' });
    h = await createHarness(dialect, {
      AGENTRY_ALLOW_INSECURE_DESTINATIONS: 'true',
      AGENTRY_POLL_MS: '100',
      AGENTRY_ADMIN_TOKEN: ADMIN_TOKEN,
    });
    base = await h.listen();
    keyPrefix = h.key.slice(0, 12);
    const principal = await h.deps.auth.authenticate(h.key, Date.now());
    keyId = principal?.keyId ?? '';
    secrets.push(h.key);
  });
  afterAll(async () => {
    await h.close();
    await mcp.close();
  });

  it('records the bootstrap of the organization and its admin key as the system’s', async () => {
    const created = await log('action=organization.created');
    expect(created).toHaveLength(1);
    expect(created[0]).toMatchObject({ actor: { type: 'system' }, request_id: null, target: { type: 'organization' } });
    const [key] = await log(`action=api_key.created&target_id=${keyId}`);
    expect(key).toMatchObject({ actor: { type: 'system' }, after: { prefix: keyPrefix } });
  });

  it('records agent create, update (with the fields changed), restore, apply and delete', async () => {
    const created = await call('POST', '/v1/agents', { name: 'audited', instructions: 'Be brief.' });
    expect(created.status).toBe(201);
    const id = created.body.agent.id;
    expect(await entryOf('agent.created', id)).toMatchObject({
      ...byKey(created.requestId),
      target: { type: 'agent', id },
      after: { name: 'audited', version: 1 },
    });

    const updated = await call('PATCH', `/v1/agents/${id}`, { instructions: 'Be thorough.', maxSteps: 7 });
    expect(updated.status).toBe(200);
    expect(await entryOf('agent.updated', id)).toMatchObject({
      ...byKey(updated.requestId),
      before: { version: 1 },
      after: { version: 2, changed_fields: ['instructions', 'maxSteps'] },
    });

    const restored = await call('POST', `/v1/agents/${id}/versions/1/restore`);
    expect(restored.status).toBe(200);
    expect(await entryOf('agent.restored', id)).toMatchObject({
      ...byKey(restored.requestId),
      after: { version: 3, changed_fields: ['instructions', 'maxSteps'] },
    });

    const applied = await call('POST', '/v1/apply', {
      documents: [
        { kind: 'agent', name: 'audited', instructions: 'Applied.' },
        { kind: 'agent', name: 'from-code' },
      ],
    });
    expect(applied.status, JSON.stringify(applied.body)).toBe(200);
    const appliedEntries = await log('action=agent.applied');
    expect(appliedEntries).toHaveLength(2);
    for (const entry of appliedEntries) expect(entry).toMatchObject(byKey(applied.requestId));
    expect(appliedEntries.find((entry) => entry.target.id === id)?.after.changed_fields).toEqual(['instructions']);

    const deleted = await call('DELETE', `/v1/agents/${id}`);
    expect(deleted.status).toBe(204);
    expect(await entryOf('agent.deleted', id)).toMatchObject({
      ...byKey(deleted.requestId),
      before: { name: 'audited', version: 4 },
    });
    // A refused change writes no entry.
    const refused = await call('PATCH', `/v1/agents/${id}`, { name: 'gone' });
    expect(refused.status).toBe(404);
    expect(await log(`target_id=${id}`)).toHaveLength(5);
  });

  it('records MCP servers with header names, never their values', async () => {
    const token = 'Bearer mcp-token-d41d8cd98f00b204';
    secrets.push(token, 'mcp-token-d41d8cd98f00b204');
    const created = await call('POST', '/v1/mcp_servers', {
      name: 'ops',
      url: mcp.url,
      headers: { Authorization: token, 'X-Env': 'mcp-env-value-9f86d081' },
    });
    expect(created.status, JSON.stringify(created.body)).toBe(201);
    secrets.push('mcp-env-value-9f86d081');
    const id = created.body.id;
    expect(await entryOf('mcp_server.created', id)).toMatchObject({
      ...byKey(created.requestId),
      after: { name: 'ops', url: mcp.url, header_names: ['Authorization', 'X-Env'] },
    });
    const changed = await call('POST', `/v1/mcp_servers/${id}`, {
      name: 'ops2',
      headers: { Authorization: 'Bearer mcp-token-rotated-0cc175b9' },
    });
    secrets.push('mcp-token-rotated-0cc175b9');
    expect(changed.status, JSON.stringify(changed.body)).toBe(200);
    expect(await entryOf('mcp_server.updated', id)).toMatchObject({
      ...byKey(changed.requestId),
      before: { name: 'ops' },
      after: { name: 'ops2', changed_fields: ['name', 'headers'] },
    });
    const noCredential = await call('DELETE', `/v1/mcp_servers/${id}/credentials`);
    expect(noCredential.status).toBe(404);
    expect(await log('action=mcp_server.credential_removed')).toHaveLength(0);
    const deleted = await call('DELETE', `/v1/mcp_servers/${id}`);
    expect(deleted.status).toBe(200);
    expect(await entryOf('mcp_server.deleted', id)).toMatchObject(byKey(deleted.requestId));
  });

  it('records webhook endpoints and secret rotation with hints only', async () => {
    const created = await call('POST', '/v1/webhook_endpoints', {
      name: 'ops',
      url: 'https://93.184.215.14/hooks',
      event_types: ['agent.session.idle'],
    });
    expect(created.status, JSON.stringify(created.body)).toBe(200);
    const id = created.body.id;
    secrets.push(created.body.signing_secret);
    expect(await entryOf('webhook_endpoint.created', id)).toMatchObject({
      ...byKey(created.requestId),
      after: { name: 'ops', url: 'https://93.184.215.14/hooks', event_types: ['agent.session.idle'] },
    });
    const updated = await call('POST', `/v1/webhook_endpoints/${id}`, { name: 'ops-2' });
    expect(updated.status).toBe(200);
    expect(await entryOf('webhook_endpoint.updated', id)).toMatchObject({
      ...byKey(updated.requestId),
      before: { name: 'ops' },
      after: { name: 'ops-2' },
    });
    const rotated = await call('POST', `/v1/webhook_endpoints/${id}/rotate_secret`, {});
    expect(rotated.status).toBe(200);
    secrets.push(rotated.body.signing_secret);
    const rotation = await entryOf('webhook_endpoint.secret_rotated', id);
    expect(rotation).toMatchObject(byKey(rotated.requestId));
    expect(rotation.before.signing_secret_hint).not.toBe(rotation.after.signing_secret_hint);
    const deleted = await call('DELETE', `/v1/webhook_endpoints/${id}`);
    expect(deleted.status).toBe(200);
    expect(await entryOf('webhook_endpoint.deleted', id)).toMatchObject(byKey(deleted.requestId));
  });

  it('records legacy webhooks without their secret', async () => {
    const secret = 'legacy-secret-8277e0910d750195';
    secrets.push(secret);
    const created = await call('POST', '/v1/webhooks', {
      url: 'https://93.184.215.14/legacy',
      events: ['task.completed'],
      secret,
    });
    expect(created.status, JSON.stringify(created.body)).toBe(201);
    const id = created.body.id;
    expect(await entryOf('legacy_webhook.created', id)).toMatchObject({
      ...byKey(created.requestId),
      after: { url: 'https://93.184.215.14/legacy', signed: true },
    });
    const deleted = await call('DELETE', `/v1/webhooks/${id}`);
    expect(deleted.status).toBe(204);
    expect(await entryOf('legacy_webhook.deleted', id)).toMatchObject(byKey(deleted.requestId));
  });

  it('records schedules: create, update, pause, resume, delete', async () => {
    const agentId = await flow.createAgent();
    const created = await call('POST', '/v1/schedules', {
      name: 'nightly',
      agent_id: agentId,
      input: 'report',
      cron: '0 3 * * *',
    });
    expect(created.status, JSON.stringify(created.body)).toBe(201);
    const id = created.body.id;
    expect(await entryOf('schedule.created', id)).toMatchObject({
      ...byKey(created.requestId),
      after: { name: 'nightly', cron: '0 3 * * *', enabled: true },
    });
    const updated = await call('POST', `/v1/schedules/${id}`, { cron: '0 4 * * *' });
    expect(updated.status, JSON.stringify(updated.body)).toBe(200);
    expect(await entryOf('schedule.updated', id)).toMatchObject({
      ...byKey(updated.requestId),
      before: { cron: '0 3 * * *' },
      after: { cron: '0 4 * * *', changed_fields: ['cron'] },
    });
    const paused = await call('POST', `/v1/schedules/${id}`, { enabled: false });
    expect(paused.status).toBe(200);
    expect(await entryOf('schedule.paused', id)).toMatchObject({
      ...byKey(paused.requestId),
      after: { enabled: false, changed_fields: ['enabled'] },
    });
    const resumed = await call('POST', `/v1/schedules/${id}`, { enabled: true });
    expect(resumed.status).toBe(200);
    expect(await entryOf('schedule.resumed', id)).toMatchObject(byKey(resumed.requestId));
    const deleted = await call('DELETE', `/v1/schedules/${id}`);
    expect(deleted.status).toBe(200);
    expect(await entryOf('schedule.deleted', id)).toMatchObject(byKey(deleted.requestId));
  });

  it('records memories written through the API, without their text', async () => {
    const agentId = await flow.createAgent();
    const created = await call('POST', `/v1/agents/${agentId}/memories`, { content: 'Likes teal', endUser: 'u-1' });
    expect(created.status).toBe(201);
    const id = created.body.id;
    expect(await entryOf('memory.created', id)).toMatchObject({
      ...byKey(created.requestId),
      after: { agent_id: agentId, end_user: 'u-1', content_chars: 10 },
    });
    const updated = await call('PATCH', `/v1/agents/${agentId}/memories/${id}`, { content: 'Likes navy blue' });
    expect(updated.status).toBe(200);
    expect(await entryOf('memory.updated', id)).toMatchObject({
      ...byKey(updated.requestId),
      after: { content_chars: 15 },
    });
    const deleted = await call('DELETE', `/v1/agents/${agentId}/memories/${id}`);
    expect(deleted.status).toBe(200);
    expect(await entryOf('memory.deleted', id)).toMatchObject(byKey(deleted.requestId));
    expect(JSON.stringify(await log(`target_id=${id}`))).not.toContain('teal');
  });

  it('records who approved or denied a tool call', async () => {
    const agentId = await flow.createAgent({
      mcpServers: [{ type: 'url', name: 'ops', url: mcp.url }],
      toolApprovals: { default: 'always_ask', overrides: {} },
    });
    for (const approved of [true, false]) {
      const sessionId = await flow.createSession(agentId);
      const accepted = await flow.submit(sessionId, `call count {"key":"audit-${approved}"}\n---\ndone`);
      const waiting = await flow.waitForMessage(sessionId, accepted.id, ['requires_action', 'completed', 'failed']);
      expect(waiting.status).toBe('requires_action');
      const [action] = waiting.requiredActions;
      const answer = approved ? { approved: true } : { approved: false, reason: 'not now' };
      const decided = await call('POST', `/v1/sessions/${sessionId}/messages/${accepted.id}/answer`, {
        actionId: action.actionId,
        answer,
      });
      expect(decided.status, JSON.stringify(decided.body)).toBe(200);
      const entry = await entryOf(approved ? 'tool_approval.approved' : 'tool_approval.denied', action.approvalId);
      expect(entry).toMatchObject({
        ...byKey(decided.requestId),
        target: { type: 'tool_approval', id: action.approvalId },
        before: { status: 'pending' },
        after: {
          status: approved ? 'approved' : 'denied',
          tool: 'count',
          session_id: sessionId,
          decided_by: 'answer',
          reason: approved ? null : 'not now',
        },
      });
      await flow.waitForMessage(sessionId, accepted.id);
    }
  });

  it('records a decision sent on /v1/responses, and a timeout as the system’s', async () => {
    const agentId = await flow.createAgent({
      mcpServers: [{ type: 'url', name: 'ops', url: mcp.url }],
      toolApprovals: { default: 'always_ask', overrides: {}, timeoutSeconds: 1 },
    });
    const first = await call('POST', '/v1/responses', { model: agentId, input: 'call count {"key":"audit-r"}' });
    expect(first.status, JSON.stringify(first.body)).toBe(200);
    const request = first.body.output.find((item: Json) => item.type === 'mcp_approval_request');
    expect(request?.id).toMatch(/^mcpr_/);
    const second = await call('POST', '/v1/responses', {
      model: agentId,
      previous_response_id: first.body.id,
      input: [{ type: 'mcp_approval_response', approval_request_id: request.id, approve: false, reason: 'no' }],
    });
    expect(second.status, JSON.stringify(second.body)).toBe(200);
    expect(await entryOf('tool_approval.denied', request.id)).toMatchObject({
      ...byKey(second.requestId),
      after: { status: 'denied', decided_by: 'responses', reason: 'no' },
    });

    const sessionId = await flow.createSession(agentId);
    const accepted = await flow.submit(sessionId, 'call count {"key":"audit-late"}');
    const waiting = await flow.waitForMessage(sessionId, accepted.id, ['requires_action', 'completed', 'failed']);
    const [action] = waiting.requiredActions;
    const expired = await waitUntil(
      async () => (await log(`action=tool_approval.denied&target_id=${action.approvalId}`))[0],
      { what: 'the timeout to deny the call', everyMs: 100 },
    );
    expect(expired).toMatchObject({
      actor: { type: 'system', api_key_id: null, api_key_prefix: null },
      request_id: null,
      after: { decided_by: 'timeout' },
    });
    await flow.waitForMessage(sessionId, accepted.id);
  });

  it('records a change of the organization’s settings (retention)', async () => {
    const changed = await call('PATCH', '/v1/organization/retention', { sessions_days: 30 });
    expect(changed.status, JSON.stringify(changed.body)).toBe(200);
    const [entry] = await log('action=organization.retention_updated');
    expect(entry).toMatchObject({
      ...byKey(changed.requestId),
      target: { type: 'organization' },
      before: { sessions: null },
      after: { sessions: 30 },
    });
  });

  it('records limits set by the operator (admin token) and by the CLI, and a session budget set with a key', async () => {
    const orgId = (await call('GET', '/v1/organization')).body.id as string;
    secrets.push(ADMIN_TOKEN);
    const response = await fetch(`${base}/v1/admin/organizations/${orgId}/limits`, {
      method: 'PUT',
      headers: {
        authorization: `Bearer ${ADMIN_TOKEN}`,
        'x-request-id': `audit-admin-${dialect}`,
        'content-type': 'application/json',
      },
      body: JSON.stringify({ requests_per_minute: 10_000 }),
    });
    expect(response.status).toBe(200);
    const [byAdmin] = await log('action=limits.updated');
    expect(byAdmin).toMatchObject({
      actor: { type: 'admin', api_key_id: null },
      request_id: `audit-admin-${dialect}`,
      target: { type: 'organization', id: orgId },
      before: { requestsPerMinute: null },
      after: { requestsPerMinute: 10_000 },
    });
    expect((await log('actor=admin')).map((entry) => entry.action)).toContain('limits.updated');
    await h.deps.limits.setOrganization(orgId, { requestsPerMinute: null });
    const [byCli] = await log('action=limits.updated');
    expect(byCli).toMatchObject({ actor: { type: 'cli' }, after: { requestsPerMinute: null } });

    const agentId = (await call('POST', '/v1/agents', { name: 'budgeted' })).body.agent.id as string;
    const session = await call('POST', '/v1/sessions', { agentId });
    const sessionId = session.body.session?.id ?? session.body.id;
    const budgeted = await call('PATCH', `/v1/sessions/${sessionId}`, { budget: { limitUsd: 2 } });
    expect(budgeted.status, JSON.stringify(budgeted.body)).toBe(200);
    const [entry] = await log('action=session.budget_updated');
    expect(entry).toMatchObject({
      ...byKey(budgeted.requestId),
      target: { type: 'session', id: sessionId },
      after: { budget: { limit_usd: 2 } },
    });
  });

  it('records keys and credits changed by the CLI’s services as the CLI', async () => {
    const other = await h.createOrg(`audit-cli-${dialect}`);
    secrets.push(other.key);
    await h.deps.orgs.setCredits(other.orgId, 12.5);
    const revoked = await h.deps.orgs.revokeKeys(other.key.slice(0, 12));
    expect(revoked.revoked).toHaveLength(1);
    const rows = await h.deps.storage.db
      .selectFrom('audit_log')
      .selectAll()
      .where('org_id', '=', other.orgId)
      .orderBy('created_at')
      .orderBy('id')
      .execute();
    expect(rows.map((row) => [row.action, row.actor_type, row.request_id])).toEqual([
      ['organization.created', 'cli', null],
      ['api_key.created', 'cli', null],
      ['credits.set', 'cli', null],
      ['api_key.revoked', 'cli', null],
    ]);
    expect(JSON.parse(rows[2]?.after ?? '{}')).toEqual({ credit_balance_usd: 12.5 });
    expect(JSON.parse(rows[2]?.before ?? '{}')).toEqual({ credit_balance_usd: null });
  });

  it('never stores a secret: the raw rows hold none of the values the test used', async () => {
    const rows = await h.deps.storage.db.selectFrom('audit_log').selectAll().execute();
    expect(rows.length).toBeGreaterThan(30);
    const raw = JSON.stringify(rows);
    expect(secrets.length).toBeGreaterThanOrEqual(8);
    for (const secret of secrets) expect(raw, 'a secret reached the audit log').not.toContain(secret);
    expect(raw).not.toMatch(/whsec_[A-Za-z0-9]{8}/);
    expect(raw).not.toMatch(/agk_[A-Za-z0-9]{40}/);
  });

  it('keeps organizations apart', async () => {
    const other = await h.createOrg(`audit-other-${dialect}`);
    const mine = await log();
    const newest = mine[0] ?? {};
    const theirs = await log('', other.key);
    expect(theirs.map((entry) => entry.action).sort()).toEqual(['api_key.created', 'organization.created']);
    expect(theirs.some((entry) => mine.some((own) => own.id === entry.id))).toBe(false);
    // Another organization's entry does not anchor a page.
    const foreign = await call('GET', `/v1/audit_log?after=${newest.id}`, undefined, other.key);
    expect(foreign.status).toBe(400);
    expect(foreign.body.error.param).toBe('after');
    const byTarget = await log(`target_id=${newest.target.id}`, other.key);
    expect(byTarget).toHaveLength(0);
  });

  it('filters by action, target, actor and time, and pages without gaps or repeats', async () => {
    const all = await log();
    expect((await log('action=agent')).every((entry) => entry.action.startsWith('agent.'))).toBe(true);
    expect((await log('action=agent.*')).length).toBe((await log('action=agent')).length);
    expect((await log('action=agent.updated')).every((entry) => entry.action === 'agent.updated')).toBe(true);
    const schedules = await log('target_type=schedule');
    expect(schedules.length).toBe(5);
    expect((await log('actor=system')).every((entry) => entry.actor.type === 'system')).toBe(true);
    const byPrefix = await log(`actor=${keyPrefix}`);
    expect(byPrefix.length).toBeGreaterThan(20);
    expect(byPrefix.every((entry) => entry.actor.api_key_prefix === keyPrefix)).toBe(true);
    expect((await log(`actor=${keyId}`)).length).toBe(byPrefix.length);
    expect(await log('actor=agk_nobody00')).toHaveLength(0);

    const newest = all[0]?.created_at;
    const oldest = all.at(-1)?.created_at;
    expect(await log(`since=${newest + 2}`)).toHaveLength(0);
    expect((await log(`since=${newest}`)).length).toBeGreaterThan(0);
    expect((await log(`until=${oldest}`)).length).toBe(0);
    expect((await log(`since=0&until=${newest + 1}`)).length).toBe(all.length);

    const seen: string[] = [];
    let after: string | null = null;
    for (let page = 0; page < 100; page++) {
      const query: string = `/v1/audit_log?limit=7${after === null ? '' : `&after=${after}`}`;
      const answer = await call('GET', query);
      expect(answer.status).toBe(200);
      seen.push(...answer.body.data.map((entry: Json) => entry.id));
      if (!answer.body.has_more) break;
      after = answer.body.last_id;
    }
    expect(seen).toEqual(all.map((entry) => entry.id));
  });

  it('answers bad input with a 400 naming the field', async () => {
    const cases: [string, string][] = [
      ['limit=0', 'limit'],
      ['limit=101', 'limit'],
      ['limit=x', 'limit'],
      ['after=not-a-uuid', 'after'],
      ['after=0190a0b0-0000-7000-8000-000000000000', 'after'],
      ['action=Agent%20Updated', 'action'],
      ['action=agent.updated.again', 'action'],
      ['target_type=a-b', 'target_type'],
      ['target_id=', 'target_id'],
      ['actor=', 'actor'],
      ['actor=a%20b', 'actor'],
      ['since=-1', 'since'],
      ['since=soon', 'since'],
      ['until=1.5', 'until'],
      ['since=100&until=100', 'until'],
      ['colour=teal', 'colour'],
    ];
    for (const [query, param] of cases) {
      const answer = await call('GET', `/v1/audit_log?${query}`);
      expect(answer.status, query).toBe(400);
      expect(answer.body.error.param ?? '', query).toContain(param);
    }
  });

  it('is read with audit:read (or accounts:write, which includes it), and nothing else', async () => {
    const auditor = await h.deps.orgs.createKey((await h.deps.auth.authenticate(h.key, Date.now()))?.orgId ?? '', [
      'audit:read',
    ]);
    const agentsOnly = await h.deps.orgs.createKey((await h.deps.auth.authenticate(h.key, Date.now()))?.orgId ?? '', [
      'tasks:read',
      'tasks:write',
      'agents:write',
    ]);
    expect((await call('GET', '/v1/audit_log', undefined, auditor)).status).toBe(200);
    const refused = await call('GET', '/v1/audit_log', undefined, agentsOnly);
    expect(refused.status).toBe(403);
    expect(refused.body.error.message).toContain('audit:read');
    // The read-only key changes nothing.
    expect((await call('POST', '/v1/agents', { name: 'x' }, auditor)).status).toBe(403);
    const none = await fetch(`${base}/v1/audit_log`);
    expect(none.status).toBe(401);
  });

  it('has no route that edits or deletes an entry', async () => {
    const before = await h.deps.storage.db.selectFrom('audit_log').selectAll().orderBy('id').execute();
    const entry = (await log())[0] ?? {};
    for (const method of ['POST', 'PUT', 'PATCH', 'DELETE']) {
      for (const path of ['/v1/audit_log', `/v1/audit_log/${entry.id}`]) {
        const answer = await call(method, path, method === 'DELETE' ? undefined : { action: 'x' });
        expect(answer.status, `${method} ${path}`).toBe(404);
        expect(answer.body.error.code).toBe('route_not_found');
      }
    }
    const after = await h.deps.storage.db
      .selectFrom('audit_log')
      .selectAll()
      .where(
        'id',
        'in',
        before.map((row) => row.id),
      )
      .orderBy('id')
      .execute();
    expect(after).toEqual(before);
  });
});

describe('redact', () => {
  it('replaces secrets by field name and by the look of a value, wherever they sit', () => {
    const summary = {
      name: 'ops',
      signing_secret: 'whsec_c2VjcmV0LXNlY3JldC1zZWNyZXQ=',
      signing_secret_hint: 'whsec_…abcd',
      headers: { Authorization: 'Bearer x' },
      env: { OPENAI_API_KEY: 'sk-live' },
      nested: [{ credentials: { access_token: 't' } }, { note: `agk_${'A'.repeat(40)}` }, { note: 'Bearer abc' }],
      apiKey: 'k',
      prefix: 'agk_ABCDEFGH',
      empty_secret: null,
    };
    expect(redact(summary)).toEqual({
      name: 'ops',
      signing_secret: REDACTED,
      signing_secret_hint: 'whsec_…abcd',
      headers: REDACTED,
      env: REDACTED,
      nested: [{ credentials: REDACTED }, { note: REDACTED }, { note: REDACTED }],
      apiKey: REDACTED,
      prefix: 'agk_ABCDEFGH',
      empty_secret: null,
    });
  });
});
