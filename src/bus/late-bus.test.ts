import { describe, expect, it } from 'vitest';
import { type Bus, createLocalBus } from './bus.ts';
import { createLateBus } from './late-bus.ts';

describe('a bus bound after its subscribers', () => {
  it('delivers within the process before bind, moves every subscription at bind, and unsubscribes after', async () => {
    const late = createLateBus();
    const seen: string[] = [];
    const off = late.subscribe('wake', ({ sessionId }) => seen.push(`wake ${sessionId}`));
    late.subscribe('interrupt', ({ sessionId }) => seen.push(`interrupt ${sessionId}`));
    late.publish('wake', { sessionId: 'before' });
    expect(seen).toEqual(['wake before']);

    const real = createLocalBus();
    late.bind(real);
    // Messages published on the real bus (by another process, in cluster mode) reach the earlier subscribers.
    real.publish('wake', { sessionId: 'remote' });
    real.publish('interrupt', { sessionId: 'remote' });
    late.publish('wake', { sessionId: 'after' });
    expect(seen).toEqual(['wake before', 'wake remote', 'interrupt remote', 'wake after']);

    off();
    off();
    real.publish('wake', { sessionId: 'gone' });
    expect(seen).toHaveLength(4);
    expect(() => late.bind(createLocalBus())).toThrow(/bound already/);
    await late.close();
  });

  it("hands delivery-state watchers to the bound bus, so a watcher made before bind hears the Redis bus's outages", async () => {
    const late = createLateBus();
    const heard: boolean[] = [];
    const off = late.watch((delivering) => heard.push(delivering));
    const state: { report: ((delivering: boolean) => void) | null } = { report: null };
    const real: Bus = {
      ...createLocalBus(),
      watch(listener) {
        state.report = listener;
        return () => {
          state.report = null;
        };
      },
    };
    late.bind(real);
    state.report?.(false);
    state.report?.(true);
    expect(heard).toEqual([false, true]);
    off();
    expect(state.report).toBeNull();
    await late.close();
  });
});
