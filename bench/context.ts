/**
 * `npm run bench -- context`: what building one turn's fitted context costs as the session grows. A turn of a long
 * session advances the session's context builder by the turn's new items (domain/turns/context-builder.ts
 * ContextBuilder, the builder the engine's context cache keeps between turns) and fits the model context to the room
 * the window leaves (`ContextBuilder.fit` over models/context-fit.ts), as engine/step.ts does. Measured at 10, 1,000
 * and 10,000 items already in the session, with a window where everything fits and with one that forces truncation,
 * each reported as a ratio against the 10-item turn of the same window (goal: flat, at most 1.2×).
 *
 * Each round builds fresh sessions of every size and runs one turn on each (not timed: in a live session the
 * earlier turns did that work), then times the next turn on each, sizes interleaved, so
 * every size sees the same machine state; the figure is the median over rounds of the mean time per turn. Reading
 * the turn's new rows from the database (one indexed query for the rows after the session's watermark, whatever the
 * session's length) is not included.
 */

import { ContextBuilder } from '../src/domain/turns/context-builder.ts';
import type { Item } from '../src/domain/turns/items.ts';
import { type BenchResult, median, positiveInt } from './support.ts';

const SIZES = [10, 1_000, 10_000] as const;
/** Items in a session's sessions across one round, per size: more sessions of the small sizes, for timer resolution. */
const ITEMS_PER_ROUND = 200_000;
/** Estimated tokens of the conversation: everything fits, or only the newest few units do. */
const WINDOWS = { fits: 100_000_000, truncated: 2_000 } as const;

const text = (seed: number, length: number): string =>
  `${seed} ${'lorem ipsum dolor sit amet '.repeat(Math.ceil(length / 27))}`.slice(0, length);

/** The items of message `index`: a user input, a tool call, its output and a reply (four items, one exchange). */
function exchange(index: number): Item[] {
  const messageId = `m${index}`;
  const base = { messageId, createdAt: index, callId: null };
  const callId = `call_${index}`;
  return [
    { ...base, id: `u${index}`, seq: index * 4, step: 0, content: { type: 'user_message', text: text(index, 200) } },
    {
      ...base,
      id: `c${index}`,
      seq: index * 4 + 1,
      step: 1,
      callId,
      content: { type: 'function_call', name: 'lookup', arguments: '{"q":"x"}', kind: 'server', actionId: 0 },
    },
    {
      ...base,
      id: `o${index}`,
      seq: index * 4 + 2,
      step: 1,
      callId,
      content: {
        type: 'function_call_output',
        name: 'lookup',
        output: text(index, 400),
        isError: false,
        source: 'server',
      },
    },
    {
      ...base,
      id: `a${index}`,
      seq: index * 4 + 3,
      step: 2,
      content: { type: 'assistant_message', text: text(index, 300) },
    },
  ];
}

interface Session {
  builder: ContextBuilder;
  /** The items of the session's next turn, made before the turn is timed. */
  next: Item[];
  index: number;
}

/** A session's builder holding `size` items (whole exchanges). */
function session(size: number): Session {
  const builder = new ContextBuilder();
  let index = 0;
  while (builder.count + 4 <= size) for (const item of exchange(index++)) builder.append(item);
  return { builder, next: exchange(index), index: index + 1 };
}

/** One turn: its new items appended and the context fitted; the messages sent. */
function turn(state: Session, room: number): number {
  for (const item of state.next) state.builder.append(item);
  return state.builder.fit(room).context.length;
}

/** The items of the session's next turn. */
function prepare(state: Session): void {
  state.next = exchange(state.index++);
}

export async function runContextBench(): Promise<BenchResult[]> {
  const rounds = positiveInt('BENCH_CONTEXT_ROUNDS', 15);
  const results: BenchResult[] = [];
  for (const [window, room] of Object.entries(WINDOWS)) {
    const perRound = new Map<number, number[]>(SIZES.map((size) => [size, []]));
    let sink = 0;
    for (let round = 0; round < rounds; round++) {
      for (const size of SIZES) {
        const sessions = Array.from({ length: Math.max(1, Math.floor(ITEMS_PER_ROUND / size)) }, () => session(size));
        // The turn before, untimed: a live session's messages were estimated by its earlier turns.
        for (const state of sessions) {
          sink += turn(state, room);
          prepare(state);
        }
        const started = performance.now();
        for (const state of sessions) sink += turn(state, room);
        perRound.get(size)?.push(((performance.now() - started) * 1000) / sessions.length);
      }
      // Let the collector take the round's sessions outside the timed parts.
      await new Promise((resolve) => setImmediate(resolve));
    }
    if (sink === 0) throw new Error('no context was built');
    const baseRounds = perRound.get(SIZES[0]) ?? [];
    const baseline = median(baseRounds);
    for (const size of SIZES) {
      const values = perRound.get(size) ?? [];
      const ratios = values.map((value, index) => value / (baseRounds[index] ?? value));
      results.push({
        name: `context turn, ${size.toLocaleString('en-US')} items, ${window === 'fits' ? 'all fits' : 'truncated'}`,
        value: median(values),
        unit: 'µs/turn',
        baseline,
        ratio: median(ratios),
        ...(size === SIZES[0] ? {} : { goal: 'ratio <= 1.2' }),
        rounds: ratios,
      });
    }
  }
  return results;
}
