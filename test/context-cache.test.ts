/**
 * The engine keeps a session's log between turns (src/domain/turns/context-cache.ts). What the model is sent must stay
 * exactly the session's history when the lease is released between turns, when another process ran turns of the
 * same session meanwhile, when items are added to the conversation outside a turn (and adopted later), and when
 * the cache holds nothing at all. A local OpenAI-compatible server records every request it gets.
 */
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ContextBuilder } from '../src/domain/turns/context-builder.ts';
import { createContextCaches } from '../src/domain/turns/context-cache.ts';
import { loadContextItems } from '../src/domain/turns/item-store.ts';
import { flows, type Json } from './helpers/fixtures.ts';
import { createHarness, dialects, type Harness } from './helpers/harness.ts';

let stub: Server;
let baseURL: string;
const requests: { messages: { role: string; content: unknown }[] }[] = [];

beforeAll(async () => {
  stub = createServer((request, response) => {
    let body = '';
    request.on('data', (chunk: Buffer) => {
      body += chunk.toString();
    });
    request.on('end', () => {
      const parsed = JSON.parse(body) as { messages: { role: string; content: unknown }[] };
      requests.push(parsed);
      const users = parsed.messages.filter((m) => m.role === 'user').length;
      const chunk = (delta: Json, finish: string | null) =>
        `data: ${JSON.stringify({ id: 'c', object: 'chat.completion.chunk', created: 0, model: 'm', choices: [{ index: 0, delta, finish_reason: finish }] })}\n\n`;
      response.writeHead(200, { 'content-type': 'text/event-stream' });
      response.write(chunk({ role: 'assistant', content: `reply to ${users} user messages` }, null));
      response.write(chunk({}, 'stop'));
      response.end('data: [DONE]\n\n');
    });
  });
  await new Promise<void>((resolve) => stub.listen(0, '127.0.0.1', resolve));
  baseURL = `http://127.0.0.1:${(stub.address() as AddressInfo).port}/v1`;
});
afterAll(() => new Promise<void>((resolve) => stub.close(() => resolve())));

/** The conversation the model was last sent, as `role: text` lines. */
function lastConversation(): string[] {
  const last = requests.at(-1);
  if (last === undefined) throw new Error('the model was never called');
  return last.messages
    .filter((m) => m.role !== 'system')
    .map((m) => {
      const text =
        typeof m.content === 'string'
          ? m.content
          : (m.content as { type: string; text?: string }[]).map((part) => part.text ?? '').join('');
      return `${m.role}: ${text}`;
    });
}

describe.each(dialects())('the context kept between turns (%s)', (dialect) => {
  const cacheSizes = ['16', '0'];
  describe.each(cacheSizes)('AGENTRY_CONTEXT_CACHE_MB=%s', (cacheMb) => {
    let h: Harness;
    const flow = flows(() => h);
    beforeAll(async () => {
      h = await createHarness(dialect, {
        AGENTRY_PROVIDERS: JSON.stringify({ stub: { baseURL, apiKey: 'k' } }),
        AGENTRY_CONTEXT_CACHE_MB: cacheMb,
      });
    });
    afterAll(async () => {
      await h.close();
    });

    async function say(sessionId: string, text: string): Promise<void> {
      const accepted = await flow.submit(sessionId, text);
      const message = await flow.waitForMessage(sessionId, accepted.id);
      expect(message.status, JSON.stringify(message)).toBe('completed');
    }

    it('sends the whole history in order across released leases and items added outside a turn', async () => {
      const agentId = await flow.createAgent({ model: 'stub/m' });
      const sessionId = await flow.createSession(agentId);
      await say(sessionId, 'one');
      // The session is idle (its lease released) before each next message.
      await say(sessionId, 'two');
      expect(lastConversation()).toEqual(['user: one', 'assistant: reply to 1 user messages', 'user: two']);
      // Items added to the conversation outside a turn are adopted by the next message.
      const added = await h.request('POST', `/v1/conversations/conv_${sessionId}/items`, {
        headers: { 'agentry-compat': 'openai' },
        body: {
          items: [
            { type: 'message', role: 'user', content: 'added by the client' },
            { type: 'message', role: 'assistant', content: 'an earlier answer' },
          ],
        },
      });
      expect(added.status, added.text).toBe(200);
      await say(sessionId, 'three');
      expect(lastConversation()).toEqual([
        'user: one',
        'assistant: reply to 1 user messages',
        'user: two',
        'assistant: reply to 2 user messages',
        'user: added by the client',
        'assistant: an earlier answer',
        'user: three',
      ]);
      await say(sessionId, 'four');
      expect(lastConversation()).toHaveLength(9);
      expect(lastConversation().slice(-2)).toEqual(['assistant: reply to 4 user messages', 'user: four']);
      // Deleted items are gone from what the model is sent next, also from a log a process kept.
      const listed = await h.request('GET', `/v1/conversations/conv_${sessionId}/items?order=asc&limit=100`);
      const earlier = (listed.body as Json).data.find(
        (item: Json) => item.role === 'assistant' && item.content[0].text === 'an earlier answer',
      );
      const deleted = await h.request('DELETE', `/v1/conversations/conv_${sessionId}/items/${earlier.id}`);
      expect(deleted.status, deleted.text).toBe(200);
      await say(sessionId, 'five');
      expect(lastConversation()).toHaveLength(10);
      expect(lastConversation()).not.toContain('assistant: an earlier answer');
      expect(lastConversation().slice(4, 6)).toEqual(['user: added by the client', 'user: three']);
    });

    it("agrees with a full read of the log after every change, as another process's cache would", async () => {
      const agentId = await flow.createAgent({ model: 'stub/m' });
      const sessionId = await flow.createSession(agentId);
      // A cache of its own, like the one of a process that ran none of these turns.
      const elsewhere = createContextCaches(16 * 1024 * 1024).forSession(sessionId);
      const db = h.deps.storage.db;
      const check = async () => {
        const seq = (
          await db
            .selectFrom('messages')
            .select(db.fn.max('seq').as('seq'))
            .where('session_id', '=', sessionId)
            .executeTakeFirst()
        )?.seq;
        const upTo = Number(seq ?? 0);
        const full = await loadContextItems(db, sessionId, upTo);
        const cached = await elsewhere.load(db, upTo);
        expect(cached.map((item) => item.id)).toEqual(full.map((item) => item.id));
        expect(cached.map((item) => item.content)).toEqual(full.map((item) => item.content));
        // The model context kept with the log (advanced by what is new) equals the context of a full read.
        const fresh = new ContextBuilder();
        for (const item of full) fresh.append(item);
        expect(elsewhere.contextOf(cached).build()).toEqual(fresh.build());
        // An array that is not the log's own (a shorter read) gets a context of its own.
        expect(elsewhere.contextOf(cached.slice(0, 1)).build()).toEqual(fresh.build().slice(0, 1));
      };
      await check();
      await say(sessionId, 'a');
      await check();
      const added = await h.request('POST', `/v1/conversations/conv_${sessionId}/items`, {
        headers: { 'agentry-compat': 'openai' },
        body: { items: [{ type: 'message', role: 'user', content: 'outside' }] },
      });
      expect(added.status, added.text).toBe(200);
      await check();
      await say(sessionId, 'b');
      await check();
      // A deleted item: the log kept elsewhere drops it once the next message adopts the marker.
      const [first] = await loadContextItems(db, sessionId, 2_147_483_647);
      const deleted = await h.request('DELETE', `/v1/conversations/conv_${sessionId}/items/${first?.id}`);
      expect(deleted.status, deleted.text).toBe(200);
      await check();
      await say(sessionId, 'c');
      await check();
      expect((await elsewhere.load(db, Number.MAX_SAFE_INTEGER)).map((item) => item.id)).not.toContain(first?.id);
      // Only the newest message's turn is not yet in the cache read before it: the read after it has it.
      expect((await elsewhere.load(db, Number.MAX_SAFE_INTEGER)).length).toBeGreaterThanOrEqual(5);
    });
  });
});
