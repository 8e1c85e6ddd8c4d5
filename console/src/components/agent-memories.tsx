/**
 * The Memories section of the agent page: what the agent remembers across sessions (/v1/agents/{id}/memories,
 * the `memory` tool's store), newest first, each with its end user; change one's text or delete it.
 */
import { useInfiniteQuery, useMutation, useQueryClient } from '@tanstack/react-query';
import { type FormEvent, useState } from 'react';
import { api, unwrap } from '../api/client.ts';
import type { Memory } from '../api/types.ts';
import { ConfirmButton, ErrorNote, When } from './ui.tsx';

const PAGE = 50;

function MemoryItem({ agentId, memory, canWrite }: { agentId: string; memory: Memory; canWrite: boolean }) {
  const queryClient = useQueryClient();
  const [editing, setEditing] = useState(false);
  const [text, setText] = useState(memory.content);
  const path = { id: agentId, memoryId: memory.id };
  const refresh = () => queryClient.invalidateQueries({ queryKey: ['memories', agentId] });
  const save = useMutation({
    mutationFn: () =>
      unwrap(api.PATCH('/v1/agents/{id}/memories/{memoryId}', { params: { path }, body: { content: text } })),
    onSuccess: async () => {
      setEditing(false);
      await refresh();
    },
  });
  const remove = useMutation({
    mutationFn: () => unwrap(api.DELETE('/v1/agents/{id}/memories/{memoryId}', { params: { path } })),
    onSuccess: refresh,
  });
  const submit = (event: FormEvent) => {
    event.preventDefault();
    save.mutate();
  };
  return (
    <li className="card">
      {editing ? (
        <form onSubmit={submit} aria-label="Edit memory">
          <textarea aria-label="Memory text" value={text} onChange={(event) => setText(event.target.value)} rows={3} />
          <div className="row">
            <button type="submit" className="primary" disabled={save.isPending}>
              Save memory
            </button>
            <button type="button" onClick={() => setEditing(false)}>
              Cancel
            </button>
          </div>
        </form>
      ) : (
        <p>{memory.content}</p>
      )}
      <div className="row">
        <span className="muted small">
          {memory.endUser === null ? 'agent-wide' : `end user ${memory.endUser}`} · updated{' '}
          <When at={memory.updatedAt} />
        </span>
        {canWrite && !editing ? (
          <>
            <button type="button" onClick={() => setEditing(true)}>
              Edit
            </button>
            <ConfirmButton
              label="Delete memory"
              consequence="Delete this memory? The agent no longer recalls it in any session."
              confirm="Confirm delete"
              onConfirm={() => remove.mutate()}
              pending={remove.isPending}
              danger
            />
          </>
        ) : null}
      </div>
      <ErrorNote error={save.error ?? remove.error} />
    </li>
  );
}

export function AgentMemories({ agentId, canWrite }: { agentId: string; canWrite: boolean }) {
  const memories = useInfiniteQuery({
    queryKey: ['memories', agentId],
    initialPageParam: undefined as string | undefined,
    queryFn: ({ pageParam }) =>
      unwrap(
        api.GET('/v1/agents/{id}/memories', {
          params: {
            path: { id: agentId },
            query: pageParam === undefined ? { limit: PAGE } : { limit: PAGE, after: pageParam },
          },
        }),
      ),
    getNextPageParam: (last) => (last.has_more && last.last_id !== null ? last.last_id : undefined),
  });
  const all = memories.data?.pages.flatMap((page) => page.data) ?? [];
  return (
    <section aria-labelledby="memories">
      <h2 id="memories">Memories</h2>
      <p className="muted">
        What the agent saved with its memory tool (or was given through the API), kept across sessions: an end user's
        memories are seen only in that user's sessions.
      </p>
      <ErrorNote error={memories.error} />
      {memories.isPending ? null : all.length === 0 ? (
        <p className="muted">No memories yet.</p>
      ) : (
        <ul className="plain-list" aria-label="Memories">
          {all.map((memory) => (
            <MemoryItem
              key={`${memory.id} ${memory.updatedAt}`}
              agentId={agentId}
              memory={memory}
              canWrite={canWrite}
            />
          ))}
        </ul>
      )}
      {memories.hasNextPage ? (
        <button type="button" onClick={() => memories.fetchNextPage()} disabled={memories.isFetchingNextPage}>
          More memories
        </button>
      ) : null}
    </section>
  );
}
