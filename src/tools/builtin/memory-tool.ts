/**
 * The `memory` internal tool (docs/memory.md): one tool, `memory {action, content?, query?, id?}`, that saves,
 * searches, updates and deletes the agent's memories across sessions, confined to the turn's end user (or to the
 * agent's own memories when the session has none). The newest memories also reach the model without a call: the
 * source adds a bounded "memories" block to the turn's instructions.
 */
import { Type } from 'typebox';
import { isUuid } from '../../lib/ids.ts';
import { storableText } from '../../lib/storable-text.ts';
import type { ToolProvider, ToolScope } from '../types.ts';
import { builtinTool, internalEntry, toolError } from './define-tool.ts';
import {
  MAX_MEMORIES_PER_SCOPE,
  MAX_MEMORY_CHARS,
  MAX_MEMORY_RESULTS,
  type MemoryEntry,
  type MemoryScope,
  type MemoryStore,
} from './memories.ts';

/** How many memories, and how many characters of them, the turn's instructions show. */
export const MEMORY_BLOCK_ITEMS = 20;
export const MEMORY_BLOCK_CHARS = 4_000;

const ACTIONS = ['save', 'search', 'update', 'delete'] as const;

const parameters = Type.Object(
  {
    action: Type.Union(
      ACTIONS.map((action) => Type.Literal(action)),
      { description: 'save a new memory, search memories, update one by id, or delete one by id' },
    ),
    content: Type.Optional(
      Type.String({
        minLength: 1,
        maxLength: MAX_MEMORY_CHARS,
        description: 'The text to remember (save, update): one fact, preference or decision per memory',
      }),
    ),
    query: Type.Optional(
      Type.String({
        maxLength: 500,
        description: 'Words that must all appear in a memory (search); empty lists the newest',
      }),
    ),
    id: Type.Optional(Type.String({ description: 'The memory to update or delete' })),
  },
  { additionalProperties: false },
);

const line = (entry: MemoryEntry): string => `- [${entry.id}] ${entry.content}`;

/** The memories block of the instructions: the newest first, whole lines only, within MEMORY_BLOCK_CHARS. */
export function memoryBlock(entries: MemoryEntry[]): string {
  if (entries.length === 0) return '';
  const lines: string[] = [];
  let chars = 0;
  for (const entry of entries) {
    const text = line(entry);
    if (chars + text.length + 1 > MEMORY_BLOCK_CHARS) break;
    lines.push(text);
    chars += text.length + 1;
  }
  const more = entries.length > lines.length ? ' (more may exist: search with the memory tool)' : '';
  return `Memories from earlier sessions, newest first${more}:\n${lines.join('\n')}`;
}

export function createMemoryProvider(store: MemoryStore): ToolProvider {
  const label = 'internal tool "memory"';

  function tool(db: ToolScope['db'], where: MemoryScope) {
    return builtinTool({
      name: 'memory',
      server: 'memory',
      changes: (args) => args.action !== 'search',
      description: `Remember things across sessions. action "save" stores content (at most ${MAX_MEMORY_CHARS} characters), "search" finds memories containing every word of query (at most ${MAX_MEMORY_RESULTS}, newest first), "update" replaces the content of the memory id, "delete" removes the memory id. Memories are kept per user of this agent.`,
      parameters,
      async run(args) {
        const content = args.content === undefined ? undefined : storableText(args.content);
        if (args.action === 'search') {
          const found = await store.search(db, where, args.query ?? '', MAX_MEMORY_RESULTS);
          return { output: found.length === 0 ? 'No memories found.' : found.map(line).join('\n'), isError: false };
        }
        if (args.action === 'save') {
          if (content === undefined) return toolError('save needs content');
          const saved = await store.save(db, where, content);
          if (saved === null) {
            return toolError(`memory is full (${MAX_MEMORIES_PER_SCOPE} memories): update or delete some first`);
          }
          return { output: `Saved memory ${saved.id}.`, isError: false };
        }
        if (args.id === undefined || !isUuid(args.id)) return toolError(`${args.action} needs the id of a memory`);
        if (args.action === 'update') {
          if (content === undefined) return toolError('update needs content');
          const updated = await store.update(db, where, args.id.toLowerCase(), content);
          return updated === null
            ? toolError(`no memory ${args.id}`)
            : { output: `Updated memory ${updated.id}.`, isError: false };
        }
        return (await store.remove(db, where, args.id.toLowerCase()))
          ? { output: `Deleted memory ${args.id}.`, isError: false }
          : toolError(`no memory ${args.id}`);
      },
    });
  }

  return {
    name: 'memory',
    claims: internalEntry('memory'),
    async sources(_agent, claimed, toolScope) {
      if (claimed.length === 0) return [];
      return [
        {
          label,
          available: true,
          load: async () => {
            const endUser = toolScope.endUser ?? null;
            const scope: MemoryScope = { orgId: toolScope.orgId, agentId: toolScope.agentId, endUser };
            const newest = await store.search(toolScope.db, scope, '', MEMORY_BLOCK_ITEMS);
            return { tools: [tool(toolScope.db, scope)], instructions: memoryBlock(newest) };
          },
        },
      ];
    },
  };
}
