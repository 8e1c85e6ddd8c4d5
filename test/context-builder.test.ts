/**
 * The model context is built item by item and kept with the session's log (ContextBuilder in
 * src/domain/turns/context-builder.ts), so a step adds only what is new. Whatever the order of appends and builds, a build
 * must equal the context of the same items built at once, and a context handed out must not change afterwards.
 */
import { describe, expect, it } from 'vitest';
import { type AttachedFile, ContextBuilder } from '../src/domain/turns/context-builder.ts';
import type { Item, ItemContent } from '../src/domain/turns/items.ts';

let seq = 0;
function item(messageId: string, step: number, content: ItemContent, callId: string | null = null): Item {
  seq += 1;
  return { id: `item_${seq}`, messageId, seq, step, callId, createdAt: seq, content };
}

const call = (name: string, actionId: number): ItemContent => ({
  type: 'function_call',
  name,
  arguments: `{"n":${actionId}}`,
  kind: 'server',
  actionId,
});
const output = (name: string, text: string): ItemContent => ({
  type: 'function_call_output',
  name,
  output: text,
  isError: false,
  source: 'server',
});

/** Three turns: tool calls and their outputs, two steps, items that are not model context, an attachment. */
function log(): Item[] {
  return [
    item('m1', 0, { type: 'user_message', text: 'weather in Paris and Rome?' }),
    item('m1', 1, { type: 'tool_list', server: { id: null, label: 'weather' }, tools: [] }),
    item('m1', 1, { type: 'assistant_message', text: 'Looking both up.' }),
    item('m1', 1, call('forecast', 1), 'call_1'),
    item('m1', 1, call('forecast', 2), 'call_2'),
    item('m1', 1, output('forecast', 'sunny'), 'call_1'),
    item('m1', 1, output('forecast', 'rain'), 'call_2'),
    item('m1', 2, { type: 'assistant_message', text: 'Paris: sunny. Rome: rain.' }),
    item('m2', 0, {
      type: 'user_message',
      text: 'and this picture?',
      attachments: [{ kind: 'image', fileId: 'file_1' }],
    }),
    item('m2', 1, { type: 'approval_decision', approvalId: 'mcpr_1', approved: true, reason: null, by: 'responses' }),
    item('m2', 1, call('describe', 3), 'call_3'),
    item('m2', 1, output('describe', 'a cat'), 'call_3'),
    item('m2', 2, { type: 'assistant_message', text: 'A cat.' }),
    item('m3', 0, { type: 'user_message', text: 'thanks' }),
  ];
}

const FILES: ReadonlyMap<string, AttachedFile> = new Map([
  ['file_1', { mediaType: 'image/png', filename: 'cat.png', data: new Uint8Array([1, 2, 3]) }],
]);

function atOnce(items: readonly Item[], files: ReadonlyMap<string, AttachedFile> = FILES) {
  const builder = new ContextBuilder();
  for (const entry of items) builder.append(entry);
  return builder.build(files);
}

describe('the model context built item by item', () => {
  it('groups a step into one assistant entry and one tool entry, and leaves out what the model does not read', () => {
    expect(atOnce(log().slice(0, 8))).toEqual([
      { role: 'user', content: [{ type: 'text', text: 'weather in Paris and Rome?' }] },
      {
        role: 'assistant',
        text: 'Looking both up.',
        toolCalls: [
          { callId: 'call_1', name: 'forecast', arguments: '{"n":1}' },
          { callId: 'call_2', name: 'forecast', arguments: '{"n":2}' },
        ],
      },
      {
        role: 'tool',
        results: [
          { callId: 'call_1', name: 'forecast', output: 'sunny', isError: false },
          { callId: 'call_2', name: 'forecast', output: 'rain', isError: false },
        ],
      },
      { role: 'assistant', text: 'Paris: sunny. Rome: rain.', toolCalls: [] },
    ]);
  });

  it('equals the context built at once after every append, and never changes a context it handed out', () => {
    const items = log();
    const builder = new ContextBuilder();
    const handedOut: { context: unknown; copy: unknown }[] = [];
    for (let count = 1; count <= items.length; count++) {
      builder.append(items[count - 1] as Item);
      expect(builder.count).toBe(count);
      const context = builder.build(FILES);
      expect(context).toEqual(atOnce(items.slice(0, count)));
      handedOut.push({ context, copy: structuredClone(context) });
    }
    // Later appends (a step's second call, its outputs, the next turn) left every earlier context as it was.
    for (const { context, copy } of handedOut) expect(context).toEqual(copy);
  });

  it('renders attachments with the files of each build and lists their ids', () => {
    const builder = new ContextBuilder();
    for (const entry of log()) builder.append(entry);
    expect(builder.attachmentIds()).toEqual(['file_1']);
    const withFile = builder.build(FILES);
    expect(withFile[4]).toEqual({
      role: 'user',
      content: [
        { type: 'text', text: 'and this picture?' },
        { type: 'image', mediaType: 'image/png', data: new Uint8Array([1, 2, 3]) },
      ],
    });
    // The file was deleted since: the next build says so, the earlier context keeps the picture.
    const without = builder.build(new Map());
    expect(without[4]).toEqual({
      role: 'user',
      content: [
        { type: 'text', text: 'and this picture?' },
        { type: 'text', text: '[file file_1 is no longer available]' },
      ],
    });
    expect(withFile[4]).toMatchObject({ content: [{ type: 'text' }, { type: 'image' }] });
  });
});
