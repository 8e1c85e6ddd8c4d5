/**
 * A Bus whose implementation is chosen after the services that hold it are built: in cluster mode the Redis bus
 * is named after the database (deps.ts), and a process that starts while Postgres is down builds its services,
 * listens, and only then learns that name (main.ts). Until `bind`, messages reach this process's handlers only
 * (nothing runs yet that would publish for other processes); at `bind`, every subscription moves to the real bus.
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
  return {
    publish(topic, message) {
      current.publish(topic, message);
    },
    subscribe(topic, handler) {
      const attach = () => current.subscribe(topic, handler);
      const subscription: Subscription = { attach, off: attach() };
      subscriptions.add(subscription);
      return () => {
        if (subscriptions.delete(subscription)) subscription.off();
      };
    },
    subscribed: (topic) => current.subscribed(topic),
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
