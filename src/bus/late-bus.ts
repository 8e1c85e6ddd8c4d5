/**
 * A Bus whose implementation is chosen after the services that hold it are built: in cluster mode the Redis bus
 * is named after the database (deps.ts), and a process that starts while Postgres is down builds its services,
 * listens, and only then learns that name (main.ts). Until `bind`, messages reach this process's handlers only
 * (nothing runs yet that would publish for other processes); at `bind`, every subscription (and delivery-state
 * watcher) moves to the real bus.
 */
import { type Bus, createLocalBus } from './bus.ts';

export interface LateBus extends Bus {
  /** Moves every subscription to `bus` and sends everything through it from now on. */
  bind(bus: Bus): void;
}

interface Subscription {
  /** Subscribes the handler on the current bus; returns its unsubscribe. */
  attach: () => () => void;
  off: () => void;
}

export function createLateBus(): LateBus {
  const local = createLocalBus();
  let current: Bus = local;
  const subscriptions = new Set<Subscription>();
  /** Attaches to the current bus now, and to the bound one at `bind`; returns the detach. */
  const track = (attach: () => () => void): (() => void) => {
    const subscription: Subscription = { attach, off: attach() };
    subscriptions.add(subscription);
    return () => {
      if (subscriptions.delete(subscription)) subscription.off();
    };
  };
  return {
    publish(topic, message) {
      current.publish(topic, message);
    },
    subscribe: (topic, handler) => track(() => current.subscribe(topic, handler)),
    subscribed: (topic) => current.subscribed(topic),
    // The bound bus reports its delivery state from `bind` on (the local one has none).
    watch: (listener) => track(() => current.watch(listener)),
    bind(bus) {
      if (current !== local) throw new Error('the bus is bound already');
      current = bus;
      for (const subscription of subscriptions) {
        subscription.off();
        subscription.off = subscription.attach();
      }
      void local.close();
    },
    close: () => current.close(),
  };
}
