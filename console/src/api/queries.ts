/** Reads several pages deep, shared by the pages that need whole lists: a run's trace, a session's transcript. */
import { api, unwrap } from './client.ts';
import type { Message, Span } from './types.ts';

const MAX_TRACE_PAGES = 40;

/** Every span of a run (pages of 50, parent-first), up to 2,000. */
export async function wholeTrace(runId: string): Promise<Span[]> {
  const spans: Span[] = [];
  let cursor: string | undefined;
  for (let page = 0; page < MAX_TRACE_PAGES; page += 1) {
    const query = cursor === undefined ? { limit: 50 } : { limit: 50, cursor };
    const answer = await unwrap(api.GET('/v1/runs/{id}/trace', { params: { path: { id: runId }, query } }));
    spans.push(...answer.data);
    if (!answer.has_more || answer.next_cursor === null) break;
    cursor = answer.next_cursor;
  }
  return spans;
}

export const traceQuery = (runId: string) => ({
  queryKey: ['trace', runId] as const,
  queryFn: () => wholeTrace(runId),
});

/** The latest 100 messages of a session, in submission order, and how many there are in all. */
export async function latestMessages(sessionId: string): Promise<{ data: Message[]; total: number }> {
  const path = { id: sessionId };
  const first = await unwrap(api.GET('/v1/sessions/{id}/messages', { params: { path, query: { limit: 100 } } }));
  if (first.total <= 100) return { data: first.data, total: first.total };
  const last = await unwrap(
    api.GET('/v1/sessions/{id}/messages', { params: { path, query: { limit: 100, offset: first.total - 100 } } }),
  );
  return { data: last.data, total: last.total };
}

export const messagesQuery = (sessionId: string) => ({
  queryKey: ['messages', sessionId] as const,
  queryFn: () => latestMessages(sessionId),
});
