import { describe, expect, it } from 'vitest';
import type { Item, ItemContent } from '../domain/turns/items.ts';
import { modelInputOf } from './spans.ts';

let seq = 0;
const item = (messageId: string, callId: string | null, content: ItemContent): Item => ({
  id: `item-${++seq}`,
  messageId,
  seq,
  step: 1,
  callId,
  createdAt: 0,
  content,
});
const output = (messageId: string, callId: string, name: string, text: string) =>
  item(messageId, callId, { type: 'function_call_output', name, output: text, isError: false, source: 'client' });
const call = (messageId: string, callId: string, name: string) =>
  item(messageId, callId, { type: 'function_call', name, arguments: '{}', kind: 'client', actionId: 0 });
const message = { id: 'm2', parts: '[]' };

describe('the input of a model call span', () => {
  it('names the tool of each output the step continues from', () => {
    const log = [call('m1', 'c1', 'get_weather'), output('m2', 'c1', 'get_weather', 'sunny')];
    expect(modelInputOf(log, message)).toBe('get_weather: sunny');
  });

  it('names an output replayed without its name by the call in the log', () => {
    const log = [call('m1', 'c1', 'get_weather'), output('m2', 'c1', '', 'sunny')];
    expect(modelInputOf(log, message)).toBe('get_weather: sunny');
  });

  it('names an output whose call is not in the log by its call id, as a run preview does', () => {
    const log = [output('m2', 'call_9', '', 'sunny'), output('m2', 'c2', 'get_time', 'noon')];
    expect(modelInputOf(log, message)).toBe('[tool output call_9] sunny\nget_time: noon');
  });
});
