/**
 * An MCP server (v1 `@modelcontextprotocol/sdk`, Streamable HTTP 2025 with sessions) whose tools ask the client
 * for input during the call: `book_table` elicits a form, `open_link` a URL, `summarise` samples the client's model
 * (whether or not the client declared `sampling`), `describe_media` samples with an image or audio clip
 * (`{kind: "image" | "audio" | "huge"}`, huge: past the client's bound). It records every run of a tool and every
 * answer it received, and whether the connection's client declared `sampling`, so a test can assert what the
 * server saw.
 */
import { randomUUID } from 'node:crypto';
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { Server } from '@modelcontextprotocol/sdk/server/index.js';
import { StreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/streamableHttp.js';
import { CallToolRequestSchema, isInitializeRequest, ListToolsRequestSchema } from '@modelcontextprotocol/sdk/types.js';

export interface ElicitationServer {
  url: string;
  /** Every run of a tool, by name (a call suspended and run again counts twice). */
  runs: Record<string, number>;
  /**
   * What the client answered, in order (`{action, content?}` of elicitations; sampling as `{sampled, declared}` or
   * `{error, declared}`, `declared`: the client had declared the `sampling` capability).
   */
  answers: unknown[];
  close(): Promise<void>;
}

const FORM_SCHEMA = {
  type: 'object' as const,
  properties: {
    name: { type: 'string' as const, description: 'Whose name the table is booked under' },
    guests: { type: 'integer' as const, minimum: 1, maximum: 12 },
  },
  required: ['name', 'guests'],
};

const tools = [
  { name: 'book_table', description: 'Books a table, asking who for.', inputSchema: { type: 'object' as const } },
  { name: 'open_link', description: 'Needs the user to sign in on a page.', inputSchema: { type: 'object' as const } },
  { name: 'summarise', description: "Summarises with the client's model.", inputSchema: { type: 'object' as const } },
  {
    name: 'describe_media',
    description: "Describes an image or audio clip with the client's model.",
    inputSchema: { type: 'object' as const, properties: { kind: { type: 'string' } } },
  },
];

/** A 1x1 red PNG. */
export const RED_PIXEL_PNG =
  'iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8DwHwAFBQIAX8jx0gAAAABJRU5ErkJggg==';
/** A few bytes standing for a WAV clip (the model stub does not play it). */
export const WAV_CLIP = Buffer.from('RIFF....WAVEfmt agentry').toString('base64');

type SamplingMessage = Parameters<Server['createMessage']>[0]['messages'][number];

/** One user message: the question and the media, as one content array (the 2025-11-25 form). */
function mediaMessages(kind: unknown): SamplingMessage[] {
  const ask = { type: 'text' as const, text: `describe this ${String(kind)}` };
  if (kind === 'audio') {
    return [{ role: 'user', content: [ask, { type: 'audio', data: WAV_CLIP, mimeType: 'audio/wav' }] }];
  }
  // Past the client's bound of 4 MiB of base64 (valid base64: 'A' decodes to zero bits).
  const data = kind === 'huge' ? 'A'.repeat(4 * 1024 * 1024 + 4) : RED_PIXEL_PNG;
  return [{ role: 'user', content: [ask, { type: 'image', data, mimeType: 'image/png' }] }];
}

const text = (value: string, isError = false) => ({ content: [{ type: 'text' as const, text: value }], isError });

function mcpServer(state: ElicitationServer): Server {
  const server = new Server({ name: 'asking', version: '1.0.0' }, { capabilities: { tools: {} } });
  server.setRequestHandler(ListToolsRequestSchema, async () => ({ tools }));
  server.setRequestHandler(CallToolRequestSchema, async (request, extra) => {
    const name = request.params.name;
    state.runs[name] = (state.runs[name] ?? 0) + 1;
    const related = { relatedRequestId: extra.requestId };
    if (name === 'book_table') {
      const answer = await server.elicitInput(
        { mode: 'form', message: 'Who is the table for?', requestedSchema: FORM_SCHEMA },
        related,
      );
      state.answers.push(answer);
      if (answer.action !== 'accept') return text(`booking ${answer.action}d`);
      return text(`booked for ${String(answer.content?.name)}, ${String(answer.content?.guests)} guests`);
    }
    if (name === 'open_link') {
      const answer = await server.elicitInput(
        {
          mode: 'url',
          message: 'Sign in to the calendar',
          url: 'https://calendar.example/connect',
          elicitationId: 'cal-1',
        },
        related,
      );
      state.answers.push(answer);
      return text(`link ${answer.action}`);
    }
    if (name === 'summarise' || name === 'describe_media') {
      const declared = server.getClientCapabilities()?.sampling !== undefined;
      const messages: SamplingMessage[] =
        name === 'summarise'
          ? [{ role: 'user', content: { type: 'text', text: 'summarise: the sky is blue' } }]
          : mediaMessages(request.params.arguments?.kind);
      try {
        const result = await server.createMessage({ messages, maxTokens: 100 }, related);
        const reply = result.content.type === 'text' ? result.content.text : '';
        state.answers.push({ sampled: reply, declared });
        return text(`summary: ${reply}`);
      } catch (error) {
        const message = error instanceof Error ? error.message : String(error);
        state.answers.push({ error: message, declared });
        return text(`sampling refused: ${message}`, true);
      }
    }
    return text(`unknown tool ${name}`, true);
  });
  return server;
}

async function body(req: IncomingMessage): Promise<unknown> {
  const chunks: Buffer[] = [];
  for await (const chunk of req) chunks.push(chunk as Buffer);
  const raw = Buffer.concat(chunks).toString('utf8');
  return raw === '' ? undefined : JSON.parse(raw);
}

export async function startElicitationServer(): Promise<ElicitationServer> {
  const transports = new Map<string, StreamableHTTPServerTransport>();
  const state: ElicitationServer = { url: '', runs: {}, answers: [], close: async () => undefined };
  const handle = async (req: IncomingMessage, res: ServerResponse) => {
    const sessionId = req.headers['mcp-session-id'];
    const parsed = req.method === 'POST' ? await body(req) : undefined;
    let transport = typeof sessionId === 'string' ? transports.get(sessionId) : undefined;
    if (transport === undefined) {
      if (req.method !== 'POST' || !isInitializeRequest(parsed)) {
        res.writeHead(typeof sessionId === 'string' ? 404 : 400).end();
        return;
      }
      const created = new StreamableHTTPServerTransport({
        sessionIdGenerator: () => randomUUID(),
        onsessioninitialized: (id) => {
          transports.set(id, created);
        },
      });
      created.onclose = () => {
        if (created.sessionId !== undefined) transports.delete(created.sessionId);
      };
      await mcpServer(state).connect(created);
      transport = created;
    }
    await transport.handleRequest(req, res, parsed);
  };
  const http = createServer((req, res) => {
    handle(req, res).catch(() => {
      if (!res.headersSent) res.writeHead(500);
      res.end();
    });
  });
  await new Promise<void>((resolve) => http.listen(0, '127.0.0.1', resolve));
  const { port } = http.address() as AddressInfo;
  state.url = `http://127.0.0.1:${port}/mcp`;
  state.close = async () => {
    for (const transport of transports.values()) await transport.close().catch(() => undefined);
    http.closeAllConnections();
    await new Promise<void>((resolve) => http.close(() => resolve()));
  };
  return state;
}
