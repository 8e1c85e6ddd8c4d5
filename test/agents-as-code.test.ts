/**
 * POST /v1/apply over HTTP, once per dialect: a plan of creates, updates (with the changed fields) and unchanged
 * agents; applying twice changes nothing; dry_run writes nothing; an agent changed since the lock's version is
 * refused unless forced; duplicate and ambiguous names and hostile bodies are 400s naming the field.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Json } from './helpers/fixtures.ts';
import { createHarness, dialects, type Harness, json } from './helpers/harness.ts';

describe.each(dialects())('agents as code: POST /v1/apply (%s)', (dialect) => {
  let h: Harness;
  let other: { orgId: string; key: string };

  beforeAll(async () => {
    h = await createHarness(dialect);
    other = await h.createOrg('other');
  });
  afterAll(() => h.close());

  const apply = (body: Json, key?: string) =>
    h.request('POST', '/v1/apply', { body, ...(key === undefined ? {} : { key }) });
  const documents = (suffix: string, instructions = 'Be brief.') => [
    { kind: 'agent', name: `support-${suffix}`, instructions, maxSteps: 8 },
    {
      kind: 'agent',
      name: `triage-${suffix}`,
      model: 'scripted',
      toolApprovals: { default: 'always_ask', overrides: {} },
    },
  ];
  const agentNamed = async (name: string, key?: string) =>
    json(await h.request('GET', '/v1/agents', key === undefined ? {} : { key })).data.find(
      (a: Json) => a.name === name,
    );

  it('creates, then finds nothing to change, and updates only what a document changes', async () => {
    const first = await apply({ documents: documents('a') });
    expect(first.status, first.text).toBe(200);
    expect(json(first).plan.map((p: Json) => [p.name, p.action, p.version])).toEqual([
      ['support-a', 'create', 1],
      ['triage-a', 'create', 1],
    ]);
    const lock = json(first).lock;
    expect(lock).toEqual({ agents: { 'support-a': 1, 'triage-a': 1 } });

    const again = json(await apply({ documents: documents('a'), lock }));
    expect(again.plan.map((p: Json) => p.action)).toEqual(['unchanged', 'unchanged']);
    expect(again.lock).toEqual(lock);
    expect((await agentNamed('support-a')).version).toBe(1);

    const changed = json(await apply({ documents: documents('a', 'Answer in French.'), lock }));
    expect(changed.plan[0]).toMatchObject({ action: 'update', changes: ['/instructions'], version: 2 });
    expect(changed.plan[1].action).toBe('unchanged');
    expect(changed.lock.agents['support-a']).toBe(2);
    const support = await agentNamed('support-a');
    expect(support).toMatchObject({ instructions: 'Answer in French.', maxSteps: 8, version: 2 });
    // The version records who applied it.
    const version = json(await h.request('GET', `/v1/agents/${support.id}/versions/2`));
    expect(version.actor).toBe(h.key.slice(0, 12));
    // Another organization has none of these: the same documents create its own.
    const theirs = json(await apply({ documents: documents('a') }, other.key));
    expect(theirs.plan.map((p: Json) => p.action)).toEqual(['create', 'create']);
  });

  it('plans without writing on dry_run', async () => {
    const planned = json(await apply({ documents: documents('dry'), dry_run: true }));
    expect(planned.dry_run).toBe(true);
    expect(planned.plan.map((p: Json) => [p.action, p.version, p.id])).toEqual([
      ['create', null, null],
      ['create', null, null],
    ]);
    expect(await agentNamed('support-dry')).toBeUndefined();
    const { lock } = json(await apply({ documents: documents('dry') }));
    const update = json(await apply({ documents: documents('dry', 'Changed.'), dry_run: true, lock }));
    expect(update.plan[0]).toMatchObject({ action: 'update', changes: ['/instructions'], version: 1 });
    expect((await agentNamed('support-dry')).instructions).toBe('Be brief.');
  });

  it('refuses to overwrite an agent changed since the last apply, unless forced', async () => {
    const { lock } = json(await apply({ documents: documents('drift') }));
    const support = await agentNamed('support-drift');
    expect(
      (await h.request('PATCH', `/v1/agents/${support.id}`, { body: { instructions: 'manual edit' } })).status,
    ).toBe(200);
    const refused = await apply({ documents: documents('drift', 'From code.'), lock });
    expect(refused.status, refused.text).toBe(409);
    expect(json(refused).error).toMatchObject({
      code: 'version_conflict',
      details: { agents: { 'support-drift': { locked: 1, current: 2 } } },
    });
    expect((await agentNamed('support-drift')).instructions).toBe('manual edit');
    // A dry run still shows the plan.
    expect(json(await apply({ documents: documents('drift', 'From code.'), lock, dry_run: true })).plan[0].action).toBe(
      'update',
    );
    const forced = json(await apply({ documents: documents('drift', 'From code.'), lock, force: true }));
    expect(forced.plan[0]).toMatchObject({ action: 'update', version: 3 });
    expect(forced.lock.agents['support-drift']).toBe(3);
    expect((await agentNamed('support-drift')).instructions).toBe('From code.');
  });

  it('refuses duplicate, ambiguous and hostile documents with a 400 naming the field', async () => {
    const twice = await apply({ documents: [...documents('dup').slice(0, 1), ...documents('dup').slice(0, 1)] });
    expect(twice.status).toBe(400);
    expect(json(twice).error.param).toBe('documents[1].name');
    for (let i = 0; i < 2; i++) {
      expect((await h.request('POST', '/v1/agents', { body: { name: 'ambiguous' } })).status).toBe(201);
    }
    const ambiguous = await apply({ documents: [{ kind: 'agent', name: 'ambiguous' }] });
    expect(ambiguous.status).toBe(400);
    expect(json(ambiguous).error.param).toBe('documents[0].name');
    const hostile: [Json, string][] = [
      [{ documents: [{ kind: 'widget', name: 'x' }] }, 'documents[0].kind'],
      [{ documents: [{ kind: 'schedule', name: 'x' }] }, 'documents[0].input'],
      [{ documents: [{ kind: 'agent', name: 'x', maxSteps: -1 }] }, 'documents[0].maxSteps'],
      [{ documents: [{ kind: 'agent', name: 'x', surprise: 1 }] }, 'documents[0].surprise'],
      [{ documents: [{ kind: 'agent', name: 'x' }], lock: { agents: { x: 0 } } }, 'lock.agents.x'],
      [{ documents: [{ kind: 'agent', name: 'x' }], dry_run: 'yes' }, 'dry_run'],
      [{ documents: 'all' }, 'documents'],
    ];
    for (const [body, param] of hostile) {
      const response = await apply(body);
      expect(response.status, `${param}: ${response.text}`).toBe(400);
      expect(json(response).error.param, response.text).toBe(param);
    }
    expect(await agentNamed('x')).toBeUndefined();
  });
});
