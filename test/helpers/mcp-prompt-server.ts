/**
 * A test MCP server offering prompts, built with the v1 `@modelcontextprotocol/sdk` (2025 Streamable HTTP,
 * stateless): `summarize` (arguments topic, required, and style), `whoami` (answers the Authorization header it was
 * asked with), and prompts returning what a message cannot carry or should not hold whole: an assistant message,
 * audio, HUGE_CHARS characters, NUL and a lone surrogate, an image, an embedded text resource, an error, a slow
 * answer (`slowMs`), no messages, and too many images. `later` is listed on a second page, as is the second of its
 * two resources. Every Authorization header is recorded with the JSON-RPC method it carried; with `accept`, other
 * Authorization headers are answered 401.
 */
import { Server } from '@modelcontextprotocol/sdk/server/index.js';
import { StreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/streamableHttp.js';
import {
  GetPromptRequestSchema,
  ListPromptsRequestSchema,
  ListResourcesRequestSchema,
} from '@modelcontextprotocol/sdk/types.js';
import { startShell } from './mcp-http-shell.ts';
import { emptyState, TINY_PNG_BASE64 } from './mcp-test-tools.ts';

export interface PromptServer {
  url: string;
  /** The JSON-RPC methods asked, in order. */
  methods: string[];
  /** The Authorization header (null when absent) of each request, with its method. */
  asked: { method: string; token: string | null }[];
  close(): Promise<void>;
}

export const HUGE_CHARS = 100_001;

const user = (text: string) => ({ role: 'user' as const, content: { type: 'text' as const, text } });

const PROMPTS = [
  {
    name: 'summarize',
    description: 'Summarizes a topic',
    arguments: [
      { name: 'topic', description: 'What to summarize', required: true },
      { name: 'style', description: 'How', required: false },
    ],
  },
  { name: 'whoami', description: 'Names the credential it was asked with' },
  { name: 'dialogue', description: 'A user and an assistant message' },
  { name: 'audio', description: 'An audio clip' },
  { name: 'huge', description: 'Too much text' },
  { name: 'hostile', description: 'NUL and a lone surrogate' },
  { name: 'picture', description: 'Text and an image' },
  { name: 'embedded', description: 'An embedded text resource' },
  { name: 'broken', description: 'Fails' },
  { name: 'slow', description: 'Answers late' },
  { name: 'empty', description: 'No messages' },
  { name: 'gallery', description: 'Too many images' },
];
/** The second page of the list (`nextCursor` of the first). */
const SECOND_PAGE = [{ name: 'later', description: 'Listed on the second page' }];
export const SECOND_CURSOR = 'page-2';

export interface PromptServerOptions {
  slowMs?: number;
  /** The Authorization headers it accepts (401 with a Bearer challenge otherwise); absent: any. */
  accept?: string[];
}

export async function startPromptServer(options: PromptServerOptions = {}): Promise<PromptServer> {
  const state = emptyState();
  const asked: PromptServer['asked'] = [];
  const messagesOf = (name: string, args: Record<string, string>, token: string | null) => {
    switch (name) {
      case 'summarize':
        return [user(`Summarize ${args.topic ?? '?'}${args.style === undefined ? '' : ` in a ${args.style} style`}.`)];
      case 'whoami':
        return [user(`token=${token ?? 'none'}`)];
      case 'dialogue':
        return [user('Hi'), { role: 'assistant' as const, content: { type: 'text' as const, text: 'Hello' } }];
      case 'audio':
        return [{ role: 'user' as const, content: { type: 'audio' as const, data: 'AAAA', mimeType: 'audio/wav' } }];
      case 'huge':
        return [user('y'.repeat(HUGE_CHARS))];
      case 'hostile':
        return [user('a\u0000b\ud800c')];
      case 'picture':
        return [
          user('Describe this picture.'),
          { role: 'user' as const, content: { type: 'image' as const, data: TINY_PNG_BASE64, mimeType: 'image/png' } },
        ];
      case 'empty':
        return [];
      case 'later':
        return [user('From the second page.')];
      case 'gallery':
        return Array.from({ length: 9 }, () => ({
          role: 'user' as const,
          content: { type: 'image' as const, data: TINY_PNG_BASE64, mimeType: 'image/png' },
        }));
      case 'embedded':
        return [
          {
            role: 'user' as const,
            content: {
              type: 'resource' as const,
              resource: { uri: 'docs://faq', mimeType: 'text/plain', text: 'The FAQ text.' },
            },
          },
        ];
      default:
        throw new Error(`the prompt ${name} failed`);
    }
  };
  const shell = await startShell({
    state,
    guard: (req, res) => {
      if (options.accept === undefined || options.accept.includes(req.headers.authorization ?? '')) return false;
      res.writeHead(401, { 'content-type': 'application/json', 'www-authenticate': 'Bearer realm="prompt-test"' });
      res.end(JSON.stringify({ error: 'unauthorized' }));
      return true;
    },
    route: async ({ req, res, json }) => {
      const token = req.headers.authorization ?? null;
      const method = typeof json === 'object' && json !== null && 'method' in json ? String(json.method) : '';
      asked.push({ method, token });
      const server = new Server(
        { name: 'prompt-test', version: '1.0.0' },
        { capabilities: { prompts: {}, resources: {} } },
      );
      server.setRequestHandler(ListResourcesRequestSchema, async (request) =>
        request.params?.cursor === SECOND_CURSOR
          ? { resources: [{ uri: 'docs://b', name: 'b' }] }
          : { resources: [{ uri: 'docs://a', name: 'a' }], nextCursor: SECOND_CURSOR },
      );
      server.setRequestHandler(ListPromptsRequestSchema, async (request) =>
        request.params?.cursor === SECOND_CURSOR
          ? { prompts: SECOND_PAGE }
          : { prompts: PROMPTS, nextCursor: SECOND_CURSOR },
      );
      server.setRequestHandler(GetPromptRequestSchema, async (request) => {
        if (request.params.name === 'slow') await new Promise((resolve) => setTimeout(resolve, options.slowMs ?? 0));
        return { messages: messagesOf(request.params.name, request.params.arguments ?? {}, token) };
      });
      const transport = new StreamableHTTPServerTransport({ enableJsonResponse: true });
      res.on('close', () => {
        void transport.close();
        void server.close();
      });
      await server.connect(transport);
      await transport.handleRequest(req, res, json);
    },
  });
  return { url: `${shell.origin}/mcp`, methods: state.methods, asked, close: () => shell.close() };
}
