/**
 * The tools every test MCP server offers, written once and served by both SDK lines (`mcp-servers.ts`): plain
 * JSON Schemas and handlers over a small context, so the 2026-07-28 server and the 2025 servers behave
 * identically and a test can assert what the server saw (calls, cancellations, per-key counts, list requests).
 */

/** Content parts in the shape both SDKs' `CallToolResult` accept. */
export type TestContent =
  | { type: 'text'; text: string }
  | { type: 'image'; data: string; mimeType: string }
  | { type: 'resource'; resource: { uri: string; mimeType?: string; text: string } }
  | { type: 'resource_link'; uri: string; name: string; mimeType?: string };

// A type alias, not an interface: the SDKs' result types carry an index signature an interface cannot meet.
export type TestToolResult = {
  content: TestContent[];
  isError?: boolean;
  structuredContent?: Record<string, unknown>;
};

export type TestSchemaProperty = { type: 'string' | 'number' | 'integer' | 'boolean'; description?: string };

export interface TestToolContext {
  /** Aborted when the client cancels the call (or its connection goes away). */
  signal: AbortSignal;
  /** The Authorization header of the HTTP request that carried the call, if any. */
  authorization: string | undefined;
  /** Sends `notifications/progress` when the client asked for progress; a no-op otherwise. */
  progress(progress: number, total: number | undefined, message: string): Promise<void>;
}

export interface TestTool {
  name: string;
  title?: string;
  description: string;
  inputSchema: { type: 'object'; properties: Record<string, TestSchemaProperty>; required?: string[] };
  annotations?: Record<string, unknown>;
  run(args: Record<string, unknown>, context: TestToolContext, state: McpServerState): Promise<TestToolResult>;
}

export interface RecordedCall {
  tool: string;
  arguments: Record<string, unknown>;
  /** The request's `_meta` as the server saw it (progress token and client keys included). */
  meta: Record<string, unknown>;
  at: number;
}

export interface RecordedCancellation {
  tool: string;
  arguments: Record<string, unknown>;
  reason: string;
  at: number;
}

/** What a test server has observed; plain data so a separate process can report it as JSON. */
export interface McpServerState {
  calls: RecordedCall[];
  cancellations: RecordedCancellation[];
  counts: Record<string, number>;
  /** `tools/list` requests received (each page counts). */
  listRequests: number;
  /** Every HTTP request as `METHOD /path` (401s included), in order. */
  http: string[];
  /** The JSON-RPC methods of every message received, in order. */
  methods: string[];
}

export function emptyState(): McpServerState {
  return { calls: [], cancellations: [], counts: {}, listRequests: 0, http: [], methods: [] };
}

/** A 1x1 transparent PNG. */
export const TINY_PNG_BASE64 =
  'iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg==';

function text(value: string): TestToolResult {
  return { content: [{ type: 'text', text: value }] };
}

function stringArg(args: Record<string, unknown>, name: string, fallback = ''): string {
  const value = args[name];
  return typeof value === 'string' ? value : fallback;
}

function numberArg(args: Record<string, unknown>, name: string, fallback: number): number {
  const value = args[name];
  return typeof value === 'number' && Number.isFinite(value) ? value : fallback;
}

/** Resolves after `ms`, or rejects with the signal's reason as soon as it aborts. */
function sleep(ms: number, signal: AbortSignal): Promise<void> {
  if (signal.aborted) return Promise.reject(signal.reason);
  return new Promise((resolve, reject) => {
    const onAbort = () => {
      clearTimeout(timer);
      reject(signal.reason);
    };
    const timer = setTimeout(() => {
      signal.removeEventListener('abort', onAbort);
      resolve();
    }, ms);
    signal.addEventListener('abort', onAbort, { once: true });
  });
}

function recordCancellation(state: McpServerState, tool: string, args: Record<string, unknown>, signal: AbortSignal) {
  state.cancellations.push({ tool, arguments: args, reason: String(signal.reason), at: Date.now() });
}

const empty = { type: 'object', properties: {} } as const;

export const BUILTIN_TOOLS: TestTool[] = [
  {
    name: 'echo',
    title: 'Echo',
    description: 'Returns its text unchanged.',
    inputSchema: { type: 'object', properties: { text: { type: 'string' } }, required: ['text'] },
    annotations: { readOnlyHint: true },
    run: async (args) => text(stringArg(args, 'text')),
  },
  {
    name: 'add',
    description: 'Adds two numbers.',
    inputSchema: {
      type: 'object',
      properties: { a: { type: 'number' }, b: { type: 'number' } },
      required: ['a', 'b'],
    },
    run: async (args) => {
      const sum = numberArg(args, 'a', 0) + numberArg(args, 'b', 0);
      return { content: [{ type: 'text', text: String(sum) }], structuredContent: { sum } };
    },
  },
  {
    name: 'fail',
    description: 'Always fails with the given message (a tool-level error, isError: true).',
    inputSchema: { type: 'object', properties: { message: { type: 'string' } } },
    run: async (args) => ({ content: [{ type: 'text', text: stringArg(args, 'message', 'failed') }], isError: true }),
  },
  {
    name: 'hang',
    description: 'Never answers; records the cancellation when the client cancels.',
    inputSchema: empty,
    run: async (args, context, state) => {
      try {
        // Bounded so a forgotten call cannot keep a test server busy forever.
        await sleep(10 * 60_000, context.signal);
      } catch {
        recordCancellation(state, 'hang', args, context.signal);
      }
      return text('finished waiting');
    },
  },
  {
    name: 'slow',
    description: 'Sends `steps` progress notifications over `ms` milliseconds, then answers.',
    inputSchema: { type: 'object', properties: { ms: { type: 'number' }, steps: { type: 'number' } } },
    run: async (args, context, state) => {
      const steps = Math.max(1, Math.floor(numberArg(args, 'steps', 3)));
      const ms = Math.max(0, numberArg(args, 'ms', 300));
      try {
        for (let step = 1; step <= steps; step++) {
          await sleep(ms / steps, context.signal);
          await context.progress(step, steps, `step ${step} of ${steps}`);
        }
      } catch {
        recordCancellation(state, 'slow', args, context.signal);
        return text('cancelled');
      }
      return text(`done after ${steps} steps`);
    },
  },
  {
    name: 'count',
    description: 'Increments the counter named `key` and returns its new value.',
    inputSchema: { type: 'object', properties: { key: { type: 'string' } }, required: ['key'] },
    run: async (args, _context, state) => {
      const key = stringArg(args, 'key', 'default');
      const value = (state.counts[key] ?? 0) + 1;
      state.counts[key] = value;
      return text(String(value));
    },
  },
  {
    name: 'image',
    description: 'Returns a tiny PNG image.',
    inputSchema: empty,
    run: async () => ({
      content: [
        { type: 'text', text: 'here is an image' },
        { type: 'image', data: TINY_PNG_BASE64, mimeType: 'image/png' },
      ],
    }),
  },
  {
    name: 'resource',
    description: 'Returns an embedded text resource and a resource link.',
    inputSchema: empty,
    run: async () => ({
      content: [
        { type: 'resource', resource: { uri: 'test://notes/1', mimeType: 'text/plain', text: 'note one' } },
        { type: 'resource_link', uri: 'test://files/report.pdf', name: 'report', mimeType: 'application/pdf' },
      ],
    }),
  },
  {
    name: 'whoami',
    description: 'Returns the Authorization header the server received.',
    inputSchema: empty,
    run: async (_args, context) => text(context.authorization ?? '(none)'),
  },
];

export interface ToolTableOptions {
  /** Built-in tools to offer (default: all). */
  only?: string[];
  /** Renames built-in tools: `{ echo: 'search' }` offers `echo` as `search`. */
  rename?: Record<string, string>;
  /** More tools, offered after the built-ins. */
  extraTools?: TestTool[];
}

/** The tool table a server starts with. */
export function toolTable(options: ToolTableOptions): TestTool[] {
  const only = options.only === undefined ? null : new Set(options.only);
  const builtins = BUILTIN_TOOLS.filter((tool) => only === null || only.has(tool.name)).map((tool) => {
    const renamed = options.rename?.[tool.name];
    return renamed === undefined ? tool : { ...tool, name: renamed };
  });
  return [...builtins, ...(options.extraTools ?? [])];
}

/** Runs `tool`, recording the call first so a test can count executions exactly. */
export function runTool(
  tool: TestTool,
  args: Record<string, unknown>,
  meta: Record<string, unknown>,
  context: TestToolContext,
  state: McpServerState,
): Promise<TestToolResult> {
  state.calls.push({ tool: tool.name, arguments: args, meta, at: Date.now() });
  return tool.run(args, context, state);
}
