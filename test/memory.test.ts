/**
 * Agent memory across sessions (docs/memory.md), on both databases through the real API: the scripted model saving,
 * searching, updating and deleting memories with the `memory` tool; a later session of the agent finding them; the
 * memories block reaching a real OpenAI-compatible model's instructions; end users kept apart (Sessions `endUser`,
 * Responses `user` / `safety_identifier`); organizations kept apart; the CRUD API with its paging, scopes and hostile
 * input; and deleting the agent deleting its memories.
 */
import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type Stub, startStub, textReply } from './helpers/chat-completions-stub.ts';
import { flows, type Json } from './helpers/fixtures.ts';
import { createHarness, dialects, type Harness, json } from './helpers/harness.ts';

const MEMORY = { kind: 'internal', name: 'memory' };
const call = (args: Json) => `call memory ${JSON.stringify(args)}`;
const replyOf = (message: Json): string => message.response?.parts[0]?.text ?? '';

let stub: Stub;
beforeAll(async () => {
  stub = await startStub(() => textReply(['noted']));
});
afterAll(() => stub.close());

describe.each(dialects())('agent memory (%s)', (dialect) => {
  let h: Harness;
  const flow = flows(() => h);
  let agentId: string;

  beforeAll(async () => {
    h = await createHarness(dialect, { AGENTRY_PROVIDERS: JSON.stringify({ stub: { baseURL: stub.url } }) });
    agentId = await flow.createAgent({ mcpServers: [MEMORY] });
  });
  afterAll(() => h.close());

  async function sessionFor(agent: string, endUser?: string): Promise<string> {
    const body = endUser === undefined ? { agentId: agent } : { agentId: agent, endUser };
    const response = await h.request('POST', '/v1/sessions', { body });
    expect(response.status, response.text).toBe(201);
    expect(json(response).session.endUser).toBe(endUser ?? null);
    return json(response).session.id;
  }

  /** One turn in a new session (of `endUser`, if given) calling the memory tool; the reply text. */
  async function useMemory(args: Json, endUser?: string, agent = agentId): Promise<string> {
    const sessionId = await sessionFor(agent, endUser);
    const accepted = await flow.submit(sessionId, call(args));
    const message = await flow.waitForMessage(sessionId, accepted.id);
    expect(message.status, JSON.stringify(message)).toBe('completed');
    return replyOf(message);
  }

  it('saves a memory in one session that a later session of the agent finds, updates and deletes', async () => {
    const saved = await useMemory({ action: 'save', content: "The user's favourite colour is teal" });
    const id = /Saved memory ([0-9a-f-]{36})\./.exec(saved)?.[1];
    expect(id, saved).toBeDefined();

    // Every word must appear, in any case; the order does not matter.
    expect(await useMemory({ action: 'search', query: 'TEAL colour' })).toContain(
      `[${id}] The user's favourite colour is teal`,
    );
    expect(await useMemory({ action: 'search', query: 'teal purple' })).toBe('memory: No memories found.');
    // LIKE's own characters are taken literally.
    expect(await useMemory({ action: 'search', query: '%' })).toBe('memory: No memories found.');

    const listed = await h.request('GET', `/v1/agents/${agentId}/memories`);
    expect(json(listed).data).toMatchObject([{ id, endUser: null, content: "The user's favourite colour is teal" }]);

    expect(await useMemory({ action: 'update', id, content: 'Favourite colour: navy' })).toBe(
      `memory: Updated memory ${id}.`,
    );
    expect(await useMemory({ action: 'search', query: 'navy' })).toContain(`[${id}] Favourite colour: navy`);
    expect(await useMemory({ action: 'delete', id })).toBe(`memory: Deleted memory ${id}.`);
    expect(await useMemory({ action: 'search', query: '' })).toBe('memory: No memories found.');
    // The model's mistakes are errors it can read.
    expect(await useMemory({ action: 'delete', id })).toContain(`Error: no memory ${id}`);
    expect(await useMemory({ action: 'save' })).toContain('Error: save needs content');
    expect(await useMemory({ action: 'forget' })).toContain('Error: invalid arguments');
    expect(await useMemory({ action: 'save', content: 'x'.repeat(2_001) })).toContain('Error: invalid arguments');
  });

  it("keeps end users apart: one's memories are never another's, nor the agent's own", async () => {
    const agent = await flow.createAgent({ mcpServers: [MEMORY] });
    await useMemory({ action: 'save', content: 'alice likes oolong tea' }, 'alice', agent);
    await useMemory({ action: 'save', content: 'shared oolong note' }, undefined, agent);
    const alice = await useMemory({ action: 'search', query: 'oolong' }, 'alice', agent);
    expect(alice).toContain('alice likes oolong tea');
    expect(alice).not.toContain('shared');
    expect(await useMemory({ action: 'search', query: 'oolong' }, 'bob', agent)).toBe('memory: No memories found.');
    const anonymous = await useMemory({ action: 'search', query: 'oolong' }, undefined, agent);
    expect(anonymous).toContain('shared oolong note');
    expect(anonymous).not.toContain('alice');

    // Bob cannot reach Alice's memory by its id either.
    const aliceId = /\[([0-9a-f-]{36})]/.exec(alice)?.[1];
    expect(await useMemory({ action: 'delete', id: aliceId }, 'bob', agent)).toContain(`Error: no memory ${aliceId}`);
    expect(await useMemory({ action: 'update', id: aliceId, content: 'hacked' }, 'bob', agent)).toContain('Error');

    // Responses: `safety_identifier` (or the older `user`) names the end user.
    const viaResponses = async (extra: Json) => {
      const response = await h.request('POST', '/v1/responses', {
        body: { model: agent, input: call({ action: 'search', query: 'oolong' }), ...extra },
      });
      expect(response.status, response.text).toBe(200);
      return json(response).output_text as string;
    };
    expect(await viaResponses({ safety_identifier: 'alice' })).toContain('alice likes oolong tea');
    expect(await viaResponses({ user: 'alice' })).toContain('alice likes oolong tea');
    expect(await viaResponses({ safety_identifier: 'bob' })).toBe('memory: No memories found.');
    expect(await viaResponses({})).not.toContain('alice');

    // The API lists one end user's memories on request.
    const listed = json(await h.request('GET', `/v1/agents/${agent}/memories?endUser=alice`));
    expect(listed.data.map((memory: Json) => memory.content)).toEqual(['alice likes oolong tea']);
  });

  it("shows the newest memories of the turn's end user in the model's instructions, bounded", async () => {
    const agent = await flow.createAgent({ model: 'stub/test-model', mcpServers: [MEMORY] });
    const create = (content: string, endUser?: string) =>
      h.request('POST', `/v1/agents/${agent}/memories`, {
        body: endUser === undefined ? { content } : { content, endUser },
      });
    expect((await create('carol prefers metric units', 'carol')).status).toBe(201);
    expect((await create('agent-wide fact')).status).toBe(201);
    // Enough long memories that the block must leave some out.
    for (let index = 0; index < 5; index++)
      expect((await create(`${index} ${'y'.repeat(1_500)}`, 'dave')).status).toBe(201);

    const systemOf = async (endUser?: string): Promise<string> => {
      const sessionId = await sessionFor(agent, endUser);
      const accepted = await flow.submit(sessionId, 'hello');
      const message = await flow.waitForMessage(sessionId, accepted.id);
      expect(message.status, JSON.stringify(message)).toBe('completed');
      const body = stub.bodies.at(-1) as Json;
      expect(body.tools.map((tool: Json) => tool.function.name)).toContain('memory');
      return body.messages.find((entry: Json) => entry.role === 'system')?.content ?? '';
    };
    const carol = await systemOf('carol');
    expect(carol).toMatch(
      /Memories from earlier sessions, newest first:\n- \[[0-9a-f-]{36}] carol prefers metric units/,
    );
    expect(carol).not.toContain('agent-wide');
    const anonymous = await systemOf();
    expect(anonymous).toContain('agent-wide fact');
    expect(anonymous).not.toContain('carol');
    const dave = await systemOf('dave');
    expect(dave).toContain('(more may exist: search with the memory tool)');
    expect(dave).toContain('- [');
    expect(dave.length).toBeLessThan(4_500);
    expect(await systemOf('erin')).not.toContain('Memories');
  });

  it('serves the CRUD API with paging, scopes and organization isolation', async () => {
    const agent = await flow.createAgent({ mcpServers: [MEMORY] });
    const base = `/v1/agents/${agent}/memories`;
    const ids: string[] = [];
    for (const content of ['one', 'two', 'three']) {
      const created = await h.request('POST', base, { body: { content, endUser: 'zed' } });
      expect(created.status, created.text).toBe(201);
      expect(json(created)).toMatchObject({ object: 'memory', agentId: agent, endUser: 'zed', content });
      ids.push(json(created).id);
    }
    const first = json(await h.request('GET', `${base}?limit=2`));
    expect(first.data.map((memory: Json) => memory.content)).toEqual(['three', 'two']);
    expect(first.has_more).toBe(true);
    const second = json(await h.request('GET', `${base}?limit=2&after=${first.last_id}`));
    expect(second).toMatchObject({ has_more: false, data: [{ content: 'one' }] });
    expect(json(await h.request('GET', `${base}?endUser=nobody`)).data).toEqual([]);

    const patched = await h.request('PATCH', `${base}/${ids[0]}`, { body: { content: 'uno' } });
    expect(patched.status, patched.text).toBe(200);
    expect(json(patched)).toMatchObject({ id: ids[0], content: 'uno', endUser: 'zed' });
    expect(json(await h.request('GET', `${base}/${ids[0]}`)).content).toBe('uno');
    const deleted = await h.request('DELETE', `${base}/${ids[1]}`);
    expect(json(deleted)).toEqual({ id: ids[1], object: 'memory.deleted', deleted: true });
    expect((await h.request('GET', `${base}/${ids[1]}`)).status).toBe(404);
    expect((await h.request('DELETE', `${base}/${ids[1]}`)).status).toBe(404);
    // A memory is found only under its own agent.
    expect((await h.request('GET', `/v1/agents/${agentId}/memories/${ids[0]}`)).status).toBe(404);

    // Another organization's agent is not found, on every route.
    const other = await h.createOrg(`memory-other-${randomUUID()}`);
    const key = other.key;
    // Read scope reads; writing needs the write scope.
    const theirs = `/v1/agents/${await flow.createAgent({}, key)}/memories`;
    const reader = await h.deps.orgs.createKey(other.orgId, ['agents:read']);
    expect((await h.request('GET', theirs, { key: reader })).status).toBe(200);
    const refused = await h.request('POST', theirs, { key: reader, body: { content: 'no' } });
    expect(refused.status).toBe(403);
    expect(json(refused).error.code).toBe('insufficient_scopes');
    expect((await h.request('GET', base, { key })).status).toBe(404);
    expect((await h.request('POST', base, { key, body: { content: 'x' } })).status).toBe(404);
    expect((await h.request('GET', `${base}/${ids[0]}`, { key })).status).toBe(404);
    expect((await h.request('PATCH', `${base}/${ids[0]}`, { key, body: { content: 'x' } })).status).toBe(404);
    expect((await h.request('DELETE', `${base}/${ids[0]}`, { key })).status).toBe(404);
    expect(json(await h.request('GET', `${base}/${ids[0]}`)).content).toBe('uno');
  });

  it('refuses hostile input with a 400 naming the field', async () => {
    const base = `/v1/agents/${agentId}/memories`;
    const cases: [Json, string][] = [
      [{ content: 'a\u0000b' }, 'content'],
      [{ content: 'lone \ud800 surrogate' }, 'content'],
      [{ content: 'x'.repeat(2_001) }, 'content'],
      [{ content: '   ' }, 'content'],
      [{ content: 'ok', endUser: 'u'.repeat(513) }, 'endUser'],
      [{ content: 'ok', endUser: '  ' }, 'endUser'],
      [{ content: 'ok', extra: 1 }, 'extra'],
      [{}, 'content'],
    ];
    for (const [body, param] of cases) {
      const response = await h.request('POST', base, { body });
      expect(response.status, `${JSON.stringify(body).slice(0, 60)}: ${response.text}`).toBe(400);
      expect(json(response).error.param).toBe(param);
    }
    const patched = await h.request('PATCH', `${base}/${randomUUID()}`, { body: { content: 'x'.repeat(10_000) } });
    expect(patched.status).toBe(400);
    expect((await h.request('GET', `${base}/not-a-uuid`)).status).toBe(400);
    const after = await h.request('GET', `${base}?after=${randomUUID()}`);
    expect(after.status).toBe(400);
    expect(json(after).error.param).toBe('after');
    const session = await h.request('POST', '/v1/sessions', { body: { agentId, endUser: 'x'.repeat(600) } });
    expect(session.status).toBe(400);
    expect(json(session).error.param).toBe('endUser');
    expect(json(await h.request('GET', base)).data.every((memory: Json) => !memory.content.includes('\u0000'))).toBe(
      true,
    );
  });

  it("deletes an agent's memories with the agent", async () => {
    const agent = await flow.createAgent({ mcpServers: [MEMORY] });
    for (const endUser of [undefined, 'yara']) {
      const body = endUser === undefined ? { content: 'gone soon' } : { content: 'gone soon', endUser };
      expect((await h.request('POST', `/v1/agents/${agent}/memories`, { body })).status).toBe(201);
    }
    const count = async () =>
      Number(
        (
          await h.deps.storage.db
            .selectFrom('memories')
            .select((eb) => eb.fn.countAll<number>().as('n'))
            .where('agent_id', '=', agent)
            .executeTakeFirstOrThrow()
        ).n,
      );
    expect(await count()).toBe(2);
    expect((await h.request('DELETE', `/v1/agents/${agent}`)).status).toBe(204);
    expect(await count()).toBe(0);
  });
});
