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
import { createSseWriter, MAX_BUFFERED_BYTES, openSse } from '../sse.ts';
import type { App } from '../types.ts';

export const REPLAY_LIMIT = 1000;

const StreamHeaders = Type.Object({
  'last-event-id': Type.Optional(
    Type.String({
      pattern: '^\\d{1,9}(\\.\\d{1,15})?$',
      description: 'Resume after this frame id (persisted events still retained are replayed)',
    }),
  ),
});

export function streamRoutes(app: App, deps: Deps, hub: StreamHub): void {
  app.route({
    method: 'GET',
    url: '/v1/sessions/:id/stream',
    config: { scopes: ['tasks:read'] },
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
      const header = request.headers['last-event-id'];
      const resumeAfter = header === undefined ? null : Number(header.split('.')[0]);

      reply.hijack();
      const raw = reply.raw;
      openSse(raw, request.id);

      let lastSeq = 0;
      let deltas = 0;
      const cleanups: (() => void)[] = [];
      deps.metrics.sseStreams(1, 'sessions');
      const writer = createSseWriter(raw, MAX_BUFFERED_BYTES, () => {
        deps.metrics.sseStreams(-1, 'sessions');
        for (const cleanup of cleanups.splice(0)) cleanup();
      });

      const deliver = (event: LiveSessionEvent) => {
        if ('seq' in event) {
          const seq = event.seq;
          if (seq <= lastSeq) return;
          lastSeq = seq;
          deltas = 0;
          writer.send(String(seq), event);
          return;
        }
        deltas += 1;
        const id = `${lastSeq}.${deltas}`;
        writer.send(id, { id, created_at: unixSeconds(deps.clock.now()), ...event });
      };

      // Opened before the replay is read: what is published meanwhile is held, and delivered after it.
      const feed = hub.follow(sessionId);
      cleanups.push(
        () => feed.close(),
        hub.track(() => writer.end()),
      );
      const beat = setInterval(() => writer.comment('heartbeat'), deps.config.sseHeartbeatMs);
      cleanups.push(() => clearInterval(beat));

      try {
        if (resumeAfter === null) {
          lastSeq = await deps.sessionEvents.lastSeq(sessionId);
          writer.comment('connected');
        } else {
          const replay = await deps.sessionEvents.after(sessionId, resumeAfter, REPLAY_LIMIT);
          writer.comment('connected');
          lastSeq = resumeAfter;
          if (replay.truncated)
            writer.comment(`replay truncated to the last ${REPLAY_LIMIT} events; reconcile with GET messages`);
          for (const event of replay.events) deliver({ ...event });
        }
        feed.start(lastSeq, { event: deliver });
      } catch (error) {
        request.log.error({ err: error }, 'session stream failed');
        writer.end();
      }
    },
  });
}
