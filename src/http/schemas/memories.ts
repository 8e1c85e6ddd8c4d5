import { Type } from 'typebox';
import { MAX_MEMORY_CHARS } from '../../tools/builtin/memories.ts';
import { CursorList, NON_BLANK, Uuid } from './common.ts';

/** An end user of the organization's application, as sessions name it (`endUser`, Responses `safety_identifier`). */
export const EndUser = Type.String({
  minLength: 1,
  maxLength: 512,
  pattern: NON_BLANK,
  description: 'The end user of your application (as sessions name it); memories of one are never shown to another',
});

const Content = Type.String({
  minLength: 1,
  maxLength: MAX_MEMORY_CHARS,
  pattern: NON_BLANK,
  description: `What the agent remembers (at most ${MAX_MEMORY_CHARS} characters)`,
});

export const MemoryParams = Type.Object({ id: Uuid, memoryId: Uuid });

export const Memory = Type.Object(
  {
    id: Uuid,
    object: Type.Literal('memory'),
    agentId: Uuid,
    endUser: Type.Union([Type.String(), Type.Null()], {
      description: "The end user the memory belongs to; null for the agent's own (sessions without an end user)",
    }),
    content: Type.String(),
    createdAt: Type.String({ format: 'date-time' }),
    updatedAt: Type.String({ format: 'date-time' }),
  },
  { additionalProperties: false },
);

export const MemoryList = CursorList(Memory, "The agent's memories, newest first");

export const MemoryListQuery = Type.Object(
  {
    limit: Type.Optional(Type.Integer({ minimum: 1, maximum: 100, default: 20 })),
    after: Type.Optional(Uuid),
    endUser: Type.Optional(EndUser),
  },
  { additionalProperties: false },
);

export const MemoryCreateBody = Type.Object(
  { content: Content, endUser: Type.Optional(Type.Union([EndUser, Type.Null()])) },
  { additionalProperties: false },
);

export const MemoryUpdateBody = Type.Object({ content: Content }, { additionalProperties: false });

export const MemoryDeleted = Type.Object(
  { id: Uuid, object: Type.Literal('memory.deleted'), deleted: Type.Literal(true) },
  { additionalProperties: false },
);
