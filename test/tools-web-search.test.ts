/**
 * `web_search` through each provider kind the operator can configure, against a local server that answers as
 * the paid or public service would (SearXNG's JSON API, a Brave-style and a Tavily-style API): the query and key
 * reach the provider, results come back as titles, URLs and snippets, a provider failure is an error the model
 * reads (an answer that is not JSON, or larger than 2 MiB, too: only that much is read), and an agent without egress is refused before its
 * query leaves. Once per provider, on SQLite.
 */
import { createServer, type IncomingMessage, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ConfigError, loadConfig } from '../src/config.ts';
import { flows, type Json } from './helpers/fixtures.ts';
import { createHarness, type Harness } from './helpers/harness.ts';

const call = (tool: string, args: Json) => `call ${tool} ${JSON.stringify(args)}`;
const reply = (message: Json) => message.response?.parts[0]?.text as string;
const WEB = { kind: 'internal', name: 'web_search_&_browse' };
const EGRESS = { allow_network_egress: true, domain_allowlist: 'all_domains' };

interface Seen {
  path: string;
  query: URLSearchParams;
  headers: IncomingMessage['headers'];
  body: string;
}

const seen: Seen[] = [];
let server: Server;
let base = '';
/** Bytes of the flooding answer written so far. */
let flooded = 0;

const RESULTS = [
  {
    title: 'Bubblewrap',
    url: 'https://github.com/containers/bubblewrap',
    text: 'Low-level unprivileged sandboxing tool',
  },
  { title: 'No URL', url: 'javascript:alert(1)', text: 'dropped' },
  { title: 'socat', url: 'http://www.dest-unreach.org/socat/', text: 'Multipurpose relay' },
];

beforeAll(async () => {
  server = createServer((request, response) => {
    const chunks: Buffer[] = [];
    request.on('data', (chunk: Buffer) => chunks.push(chunk));
    request.on('end', () => {
      const url = new URL(request.url ?? '/', 'http://local');
      const body = Buffer.concat(chunks).toString();
      seen.push({ path: url.pathname, query: url.searchParams, headers: request.headers, body });
      const query = url.searchParams.get('q') ?? (body === '' ? '' : JSON.parse(body).query);
      if (query === 'flood') {
        // An answer that does not end before a reader gives up: 256 MiB unless the connection closes first.
        response.writeHead(200, { 'content-type': 'application/json' });
        const chunk = Buffer.alloc(64 * 1024, ' ');
        const write = () => {
          while (flooded < 256 * 1024 * 1024 && !response.destroyed) {
            flooded += chunk.length;
            if (!response.write(chunk)) return void response.once('drain', write);
          }
          response.end();
        };
        return write();
      }
      if (query === 'fail') {
        response.writeHead(503, { 'content-type': 'application/json' });
        return response.end('{"error":"overloaded"}');
      }
      if (query === 'garbage') {
        response.writeHead(200, { 'content-type': 'application/json' });
        return response.end('<html>not json</html>');
      }
      const found = query === 'nothing' ? [] : RESULTS;
      response.writeHead(200, { 'content-type': 'application/json' });
      if (url.pathname.endsWith('/search') && request.method === 'GET') {
        // SearXNG: {query, results:[{title,url,content}]}
        return response.end(
          JSON.stringify({ query, results: found.map(({ text, ...r }) => ({ ...r, content: text })) }),
        );
      }
      if (url.pathname === '/brave') {
        return response.end(
          JSON.stringify({ web: { results: found.map(({ text, ...r }) => ({ ...r, description: text })) } }),
        );
      }
      // Tavily: POST {query, max_results} → {results:[{title,url,content}]}
      return response.end(JSON.stringify({ results: found.map(({ text, ...r }) => ({ ...r, content: text })) }));
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});
afterAll(() => new Promise<void>((resolve) => server.close(() => resolve())));

describe.each([
  ['searxng', () => ({ AGENTRY_WEB_SEARCH_URL: `${base}/searxng` })],
  ['brave', () => ({ AGENTRY_WEB_SEARCH_URL: `${base}/brave`, AGENTRY_WEB_SEARCH_API_KEY: 'brave-key' })],
  ['tavily', () => ({ AGENTRY_WEB_SEARCH_URL: `${base}/tavily`, AGENTRY_WEB_SEARCH_API_KEY: 'tavily-key' })],
] as const)('web_search through %s', (provider, env) => {
  let h: Harness;
  const flow = flows(() => h);
  beforeAll(async () => {
    h = await createHarness('sqlite', {
      AGENTRY_WEB_SEARCH_PROVIDER: provider,
      AGENTRY_WEB_SEARCH_RESULTS: '5',
      ...env(),
    });
  });
  afterAll(async () => {
    await h?.close();
  });

  it('returns titles, URLs and snippets, with no warning', async () => {
    const agentId = await flow.createAgent({ mcpServers: [WEB], networkPolicy: EGRESS });
    const before = seen.length;
    const { accepted, message } = await flow.turn(agentId, call('web_search', { query: 'sandbox tools' }));
    expect(accepted.warnings).toEqual([]);
    expect(reply(message)).toBe(
      [
        'web_search: 1. Bubblewrap',
        '   https://github.com/containers/bubblewrap',
        '   Low-level unprivileged sandboxing tool',
        '2. socat',
        '   http://www.dest-unreach.org/socat/',
        '   Multipurpose relay',
      ].join('\n'),
    );
    const request = seen.slice(before)[0];
    if (provider === 'searxng') {
      expect(request?.path).toBe('/searxng/search');
      expect(request?.query.get('q')).toBe('sandbox tools');
      expect(request?.query.get('format')).toBe('json');
    } else if (provider === 'brave') {
      expect(request?.query.get('q')).toBe('sandbox tools');
      expect(request?.query.get('count')).toBe('5');
      expect(request?.headers['x-subscription-token']).toBe('brave-key');
    } else {
      expect(JSON.parse(request?.body ?? '{}')).toEqual({ query: 'sandbox tools', max_results: 5 });
      expect(request?.headers.authorization).toBe('Bearer tavily-key');
    }
  });

  it('says when nothing was found, and reports a failing provider as an error', async () => {
    const agentId = await flow.createAgent({ mcpServers: [WEB], networkPolicy: EGRESS });
    const { message } = await flow.turn(
      agentId,
      `${call('web_search', { query: 'nothing' })}\n${call('web_search', { query: 'fail' })}`,
    );
    expect(reply(message)).toContain('web_search: no results for "nothing"');
    expect(reply(message)).toContain(`web_search: Error: the search provider (${provider}) answered HTTP 503`);
  });

  it('reports an answer that is not JSON', async () => {
    const agentId = await flow.createAgent({ mcpServers: [WEB], networkPolicy: EGRESS });
    const { message } = await flow.turn(agentId, call('web_search', { query: 'garbage' }));
    expect(reply(message)).toContain(`web_search: Error: the search provider (${provider}) did not answer JSON`);
  });

  it('reads an answer only up to its bound', async () => {
    const agentId = await flow.createAgent({ mcpServers: [WEB], networkPolicy: EGRESS });
    flooded = 0;
    const { message } = await flow.turn(agentId, call('web_search', { query: 'flood' }));
    expect(reply(message)).toContain(`web_search: Error: the search provider (${provider}) answered more than`);
    expect(flooded).toBeLessThan(64 * 1024 * 1024);
  });

  it('refuses to send the query out for an agent without egress', async () => {
    const agentId = await flow.createAgent({ mcpServers: [WEB] });
    const before = seen.length;
    const { message } = await flow.turn(agentId, call('web_search', { query: 'secret plans' }));
    expect(reply(message)).toBe("web_search: Error: refused: the agent's network policy allows no network access");
    expect(seen.length).toBe(before);
  });
});

describe('web search configuration', () => {
  it('needs a URL for SearXNG and a key for the API providers', () => {
    expect(() => loadConfig({ AGENTRY_WEB_SEARCH_PROVIDER: 'searxng' })).toThrow(ConfigError);
    expect(() => loadConfig({ AGENTRY_WEB_SEARCH_PROVIDER: 'brave' })).toThrow(/AGENTRY_WEB_SEARCH_API_KEY/);
    expect(() => loadConfig({ AGENTRY_WEB_SEARCH_PROVIDER: 'bing' })).toThrow(/must be one of searxng, brave, tavily/);
    expect(loadConfig({ AGENTRY_WEB_SEARCH_PROVIDER: 'tavily', AGENTRY_WEB_SEARCH_API_KEY: 'k' }).webSearch).toEqual({
      provider: 'tavily',
      url: null,
      apiKey: 'k',
      results: 8,
    });
    expect(loadConfig({}).webSearch).toBeNull();
  });
});
