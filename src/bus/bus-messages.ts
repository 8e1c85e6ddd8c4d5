/**
 * The messages of each bus topic as JSON Schemas, for what crosses between processes: a message from Redis is
 * checked against its topic's schema before any handler sees it, typed by it, so a message of another version or
 * of something else on the channel is dropped, never handed on. The checks at the end fail the typecheck when a
 * schema and `BusMessages` drift apart (everything a process publishes must pass, and what passes is the type).
 */
import { type Static, type TSchema, Type } from 'typebox';
import { Compile } from 'typebox/schema';
import { LiveSessionEventSchema } from '../events/session-event-schema.ts';
import type { BusMessages, Topic } from './bus.ts';

const SCHEMAS = {
  wake: Type.Object({ sessionId: Type.String() }),
  interrupt: Type.Object({ sessionId: Type.String(), messageId: Type.Optional(Type.String()) }),
  live: Type.Object({ sessionId: Type.String(), event: LiveSessionEventSchema }),
  outbox: Type.Object({ sessionId: Type.String() }),
} as const satisfies Record<Topic, TSchema>;

/** Reads a value received for a topic as its message; null when it is not one. */
export type BusMessageParser = <T extends Topic>(topic: T, value: unknown) => BusMessages[T] | null;

const checked = <S extends TSchema>(schema: S): ((value: unknown) => Static<S> | null) => {
  const validator = Compile(schema);
  return (value) => (validator.Check(value) ? value : null);
};

/** Compiles the topics' schemas (once per bus) into a parser. */
export function busMessageParser(): BusMessageParser {
  const parsers: { [T in Topic]: (value: unknown) => BusMessages[T] | null } = {
    wake: checked(SCHEMAS.wake),
    interrupt: checked(SCHEMAS.interrupt),
    live: checked(SCHEMAS.live),
    outbox: checked(SCHEMAS.outbox),
  };
  return (topic, value) => parsers[topic](value);
}

// Drift checks, evaluated by the typecheck.
type Fits<A, B> = [A] extends [B] ? true : false;
type Check<T extends true> = T;
export type BusMessageChecks = [
  Check<Fits<BusMessages['wake'], Static<typeof SCHEMAS.wake>>>,
  Check<Fits<BusMessages['interrupt'], Static<typeof SCHEMAS.interrupt>>>,
  Check<Fits<BusMessages['live'], Static<typeof SCHEMAS.live>>>,
  Check<Fits<BusMessages['outbox'], Static<typeof SCHEMAS.outbox>>>,
];
