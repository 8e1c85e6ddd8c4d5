/** What a session reads as in lists: its title, or its first message while it has none, and its message count. */
import { useQuery } from '@tanstack/react-query';
import { api, unwrap } from '../api/client.ts';
import type { Session } from '../api/types.ts';
import { shortId } from './ui.tsx';

/** The first message of a session and how many it has; asked again when the session changes. */
export function useSessionPreview(session: Pick<Session, 'id' | 'updatedAt'>) {
  return useQuery({
    queryKey: ['session-preview', session.id, session.updatedAt],
    queryFn: () =>
      unwrap(api.GET('/v1/sessions/{id}/messages', { params: { path: { id: session.id }, query: { limit: 1 } } })),
    staleTime: Number.POSITIVE_INFINITY,
  });
}

/** The name a session reads as: its title, else its first message, else its short id. */
export function sessionName(session: Pick<Session, 'id' | 'title'>, firstMessage: string | undefined): string {
  if (session.title !== null) return session.title;
  const text = firstMessage?.replace(/\s+/g, ' ').trim() ?? '';
  if (text === '') return `Session ${shortId(session.id)}`;
  return text.length > 80 ? `${text.slice(0, 79)}…` : text;
}

/** The first message's text, once known. */
export function firstText(preview: ReturnType<typeof useSessionPreview>): string | undefined {
  const parts = preview.data?.data[0]?.parts;
  if (parts === undefined) return undefined;
  const text = parts
    .flatMap((part) => (part.type === 'text' || part.type === 'mcp_prompt' ? [part.text] : []))
    .join(' ');
  // A message of files alone reads as their names.
  return text.trim() !== ''
    ? text
    : parts.flatMap((part) => (part.type === 'image' || part.type === 'file' ? [part.filename] : [])).join(', ');
}
