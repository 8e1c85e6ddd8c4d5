/**
 * One turn of an agent for a caller that speaks another protocol (MCP today): the caller names an agent and, when it
 * continues a conversation, a Session of that agent; the turn runs in that Session as any Sessions API message does
 * (so the caller, or anyone with a key of the org, can read it later with GET /v1/sessions/{id}/messages/{id}), and
 * is recorded as a Run with the caller's source.
 *
 * `follow` waits for the turn to settle (end, or wait for the caller) on the session's live events, reporting the
 * turn's tool events on the way; a caller that goes away cancels the turn through `cancel`. What a waiting turn
 * asks for comes back through `answer` (questions, approvals) and `clientOutputs` (client tools).
 */
import type { StreamHub } from '../../bus/live-hub.ts';
import { notFound, validationError } from '../../errors/app-error.ts';
import type { MessageEventData } from '../../events/session-events.ts';
import { newId } from '../../lib/ids.ts';
import type { RunSource } from '../../storage/column-values.ts';
import type { AgentService } from '../agents/agent-service.ts';
import type { SessionService } from '../sessions/session-service.ts';
import type { MessageService } from '../turns/message-service.ts';
import type { Message } from '../turns/message-types.ts';
import { isSettled, waitForMessage } from '../turns/message-wait.ts';

export interface ProtocolTurnDeps {
  agents: Pick<AgentService, 'get'>;
  sessions: Pick<SessionService, 'create' | 'get'>;
  messages: Pick<MessageService, 'submit' | 'get' | 'cancelMessage' | 'answer' | 'recordClientOutputs'>;
  live: StreamHub;
  /** Re-read a followed message this often (cluster mode, where a live event can be lost), or never (null). */
  recheckMs: number | null;
}

export interface ProtocolTurnInput {
  orgId: string;
  agentId: string;
  /** The Session to continue; null starts a new one. */
  sessionId: string | null;
  text: string;
  source: Extract<RunSource, 'mcp'>;
}

/** What a turn reports while it runs: its tool calls, their progress and their results. */
export type TurnToolEvent = Extract<MessageEventData, { type: 'tool_call' | 'tool_result' | 'tool_progress' }>;

const TOOL_EVENT_TYPES: ReadonlySet<string> = new Set(['tool_call', 'tool_result', 'tool_progress']);

const isToolEvent = (data: MessageEventData): data is TurnToolEvent => TOOL_EVENT_TYPES.has(data.type);

/** The longest one wait lasts before the message is read again (a caller's own deadline ends it sooner). */
const WAIT_SLICE_MS = 60_000;

export function createProtocolTurns(deps: ProtocolTurnDeps) {
  return {
    /** Accepts the turn: in a new Session of the agent, or in `sessionId`, which must be a Session of that agent. */
    async start(input: ProtocolTurnInput): Promise<{ sessionId: string; message: Message }> {
      const { orgId, agentId } = input;
      let sessionId = input.sessionId;
      if (sessionId === null) {
        sessionId = (await deps.sessions.create(orgId, { agentId })).id;
      } else {
        const session = await deps.sessions.get(orgId, sessionId);
        if (session.agentId !== agentId) {
          throw validationError('session_id', `session ${sessionId} is not a session of agent ${agentId}`);
        }
      }
      const { body } = await deps.messages.submit(
        {
          orgId,
          sessionId,
          parts: [{ type: 'text', text: input.text }],
          idempotencyKey: newId(),
          source: input.source,
        },
        (trx, id) => deps.agents.get(orgId, id, trx),
      );
      return { sessionId, message: body };
    },

    /**
     * Waits until the message ends or waits for the caller (a question, an approval, a client tool), calling
     * `onToolEvent` with each tool event of the turn meanwhile. Returns the message as last read; when `signal`
     * aborts first, that is the message as it was then.
     */
    async follow(
      orgId: string,
      target: { sessionId: string; messageId: string },
      options: { signal: AbortSignal; onToolEvent?: (event: TurnToolEvent) => void },
    ): Promise<Message> {
      const { sessionId, messageId } = target;
      const { onToolEvent } = options;
      const unsubscribe =
        onToolEvent === undefined
          ? () => {}
          : deps.live.subscribe(sessionId, (event) => {
              if (event.kind === 'message.event' && event.message_id === messageId && isToolEvent(event.data)) {
                onToolEvent(event.data);
              }
            });
      try {
        const read = () => deps.messages.get(orgId, sessionId, messageId);
        for (;;) {
          const message = await waitForMessage(
            { hub: deps.live, read, recheckMs: deps.recheckMs, signal: options.signal },
            sessionId,
            messageId,
            WAIT_SLICE_MS,
          );
          if (isSettled(message) || options.signal.aborted) return message;
        }
      } finally {
        unsubscribe();
      }
    },

    /** The turn as it is now; not found unless it is a turn of the org (and, when `agentId` is given, of that agent). */
    async read(orgId: string, target: { sessionId: string; messageId: string }, agentId: string | null) {
      if (agentId !== null && (await deps.sessions.get(orgId, target.sessionId)).agentId !== agentId) {
        throw notFound('message', target.messageId);
      }
      return deps.messages.get(orgId, target.sessionId, target.messageId);
    },

    /** Cancels the turn (a running one through its worker); a settled turn is left as it is. */
    async cancel(orgId: string, messageId: string): Promise<void> {
      await deps.messages.cancelMessage(orgId, messageId);
    },

    /** Answers a question the turn asked (see MessageService.answer). */
    async answer(orgId: string, target: { sessionId: string; messageId: string }, actionId: number, answer: unknown) {
      return deps.messages.answer(orgId, target, actionId, answer);
    },

    /** Records the outputs of client tool calls the turn waits for; it goes on once none is left waiting. */
    async clientOutputs(orgId: string, sessionId: string, outputs: { callId: string; output: string }[]) {
      await deps.messages.recordClientOutputs(orgId, sessionId, outputs, 'continue');
    },
  };
}

export type ProtocolTurns = ReturnType<typeof createProtocolTurns>;
