/**
 * The values a session event carries (the kind of a tool call, what a turn waits for, its error and its
 * warnings), kept below the modules that write them (domain/turns), the tool layer that reports warnings, and the
 * bus that carries the events (see src/ARCHITECTURE.md). Their guards and the columns they are stored in stay with
 * their writers; the statuses are column values (storage/column-values.ts).
 */

/** Who answers a tool call: the service (server), the API caller (client), or a person (question). */
export const CALL_KINDS = ['server', 'client', 'question'] as const;
export type CallKind = (typeof CALL_KINDS)[number];

/** The built-in tool through which the model asks a person; its calls become `ask_user_question` actions. */
export const ASK_USER_QUESTION = 'ask_user_question';

export type RequiredAction =
  | { type: 'ask_user_question'; actionId: number; question: string; options: unknown[] | null }
  | { type: 'function_call'; callId: string; name: string; arguments: string }
  | {
      type: 'tool_approval';
      actionId: number;
      callId: string;
      /** The exposed tool name (as the model called it). */
      tool: string;
      /** The server's label (`agentry` for built-in tools) and the tool's own name there. */
      server: string;
      serverTool: string;
      /** The arguments exactly as they will run once approved (a JSON text). */
      arguments: string;
      approvalId: string;
      /** When the call is denied unless decided before (ISO 8601), or null when it waits indefinitely. */
      expiresAt: string | null;
    }
  | {
      /** An MCP server asked for input during a tool call (`elicitation/create`, or a 2026-07-28 `input_required`). */
      type: 'mcp_elicitation';
      actionId: number;
      callId: string;
      /** The exposed tool name of the call that asked. */
      tool: string;
      /** The server's label. */
      server: string;
      elicitationId: string;
      /** `form`: answer with data fitting `requestedSchema`; `url`: open `url`, then accept or decline. */
      mode: ElicitationMode;
      message: string;
      requestedSchema: Record<string, unknown> | null;
      url: string | null;
    };

export const ELICITATION_MODES = ['form', 'url'] as const;
export type ElicitationMode = (typeof ELICITATION_MODES)[number];

/** How a person answered an elicitation (the MCP `ElicitResult` actions). */
export const ELICITATION_ACTIONS = ['accept', 'decline', 'cancel'] as const;
export type ElicitationAction = (typeof ELICITATION_ACTIONS)[number];

export interface MessageError {
  code: string;
  message: string;
}

/**
 * A non-fatal note on a message: at acceptance, what the agent configures that this deployment cannot run
 * (`tool_unavailable`, …); during the turn, a tool call it gave up (`tool_call_abandoned`, naming the call).
 */
export interface Warning {
  code: string;
  message: string;
  /** The tool call the warning is about, when it is about one. */
  callId?: string;
  /** That call's tool, as the agent called it. */
  tool?: string;
}
