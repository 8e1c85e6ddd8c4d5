/**
 * GET /v1/sessions/{id}/stream: live session events as Server-Sent Events. Frame ids are scoped to the session
 * channel: a persisted event's id is its sequence number; a text delta's id is `<last seq>.<n>`. A client that
 * reconnects with Last-Event-ID gets the persisted events it missed (the most recent REPLAY_LIMIT), then live
 * ones; deltas are live only (the completed event carries the whole text). A stream left open never skips a
 * persisted event: the hub's feed reads any it did not receive live from the database, in order (live-hub.ts).
 */
import { Type } from 'typebox';
import type { StreamHub } from '../../bus/live-hub.ts';
import type { Deps } from '../../deps.ts';
import type { LiveSessionEvent } from '../../events/session-events.ts';
import { unixSeconds } from '../../lib/clock.ts';
import { orgOf } from '../auth.ts';
import { errorResponses, IdParams } from '../schemas/common.ts';
import { lastEventIdHeader, resumeAfter, streamSse } from '../sse.ts';
import type { App } from '../types.ts';

export const REPLAY_LIMIT = 1000;

const StreamHeaders = Type.Object({
  'last-event-id': lastEventIdHeader('Resume after this frame id (persisted events still retained are replayed)'),
});

export function streamRoutes(app: App, deps: Deps, hub: StreamHub): void {
  app.route({
    method: 'GET',
    url: '/v1/sessions/:id/stream',
    config: { scopes: ['sessions:read'] },
    schema: {
      summary: 'Stream session events',
      description: `text/event-stream of SessionEvent JSON objects, one per data line, with heartbeat comments. Send Last-Event-ID to replay missed persisted events (up to ${REPLAY_LIMIT}).`,
      tags: ['Sessions'],
      params: IdParams,
      headers: StreamHeaders,
      response: {
        200: Type.Unsafe<string>({
          description: 'Server-Sent Events: one SessionEvent JSON object per data line, and heartbeat comments',
          content: { 'text/event-stream': { schema: { type: 'string' } } },
        }),
        ...errorResponses(400, 401, 403, 404),
      },
    },
    handler: async (request, reply) => {
      const sessionId = request.params.id.toLowerCase();
      await deps.sessions.get(orgOf(request), sessionId);
      const resumeFrom = resumeAfter(request.headers['last-event-id']);
      await streamSse(reply, deps, { surface: 'sessions', heartbeat: 'heartbeat' }, async (stream) => {
        let lastSeq = 0;
        let deltas = 0;
        const deliver = (event: LiveSessionEvent) => {
          if ('seq' in event) {
            const seq = event.seq;
            if (seq <= lastSeq) return;
            lastSeq = seq;
            deltas = 0;
            stream.send({ id: String(seq), data: event });
            return;
          }
          deltas += 1;
          const id = `${lastSeq}.${deltas}`;
          stream.send({ id, data: { id, created_at: unixSeconds(deps.clock.now()), ...event } });
        };
        // Opened before the replay is read: what is published meanwhile is held, and delivered after it.
        const feed = hub.follow(sessionId);
        try {
          if (resumeFrom === null) {
            lastSeq = await deps.sessionEvents.lastSeq(sessionId);
            stream.comment('connected');
          } else {
            const replay = await deps.sessionEvents.after(sessionId, resumeFrom, REPLAY_LIMIT);
            stream.comment('connected');
            lastSeq = resumeFrom;
            if (replay.truncated)
              stream.comment(`replay truncated to the last ${REPLAY_LIMIT} events; reconcile with GET messages`);
            for (const event of replay.events) deliver({ ...event });
          }
          // Pushed events: the stream lasts until the client leaves, falls behind or the server stops.
          feed.start(lastSeq, { event: deliver });
          await stream.ended;
        } finally {
          feed.close();
        }
      });
      return reply;
    },
  });
}
