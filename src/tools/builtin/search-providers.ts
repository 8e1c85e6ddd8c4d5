/**
 * Web search through the provider the operator configures (AGENTRY_WEB_SEARCH_*): a SearXNG instance's JSON API,
 * or an API-key service with the Brave Search or Tavily interface. Each answer is narrowed to title, URL and
 * snippet; a provider that answers with anything else is an error, never a crash. The provider is the operator's
 * own choice (it may be a SearXNG on the private network), so it is called like a configured toolkit, not through
 * the agents' egress guard; what an agent may then open is decided by `web_browse` under its policy.
 */
import type { WebSearchConfig } from '../../config.ts';
import type { EgressFetch } from '../../lib/egress-fetch.ts';
import { CpuJobError } from '../../workers/cpu-pool.ts';
import type { CpuWork } from './cpu-work.ts';
import { readBounded } from './policy-fetch.ts';

export interface SearchResult {
  title: string;
  url: string;
  snippet: string;
}

/** The endpoint each provider answers on when AGENTRY_WEB_SEARCH_URL does not say otherwise. */
export const DEFAULT_SEARCH_URLS: Record<WebSearchConfig['provider'], string | null> = {
  searxng: null,
  brave: 'https://api.search.brave.com/res/v1/web/search',
  tavily: 'https://api.tavily.com/search',
};

/** Answer bytes read; a larger answer is an error (and is never read to its end). */
const MAX_ANSWER_BYTES = 2 * 1024 * 1024;

function record(value: unknown): Record<string, unknown> | null {
  return typeof value === 'object' && value !== null && !Array.isArray(value)
    ? (value as Record<string, unknown>)
    : null;
}

const text = (value: unknown): string => (typeof value === 'string' ? value.replace(/\s+/g, ' ').trim() : '');

/** Picks `{title, url, snippet}` out of a provider's result objects; entries without an http(s) URL are dropped. */
function results(list: unknown, snippetField: string, limit: number): SearchResult[] {
  if (!Array.isArray(list)) throw new Error('the search provider answered without a result list');
  const out: SearchResult[] = [];
  for (const entry of list) {
    const fields = record(entry);
    const url = text(fields?.url);
    if (fields === null || !/^https?:\/\//i.test(url)) continue;
    out.push({ title: text(fields.title) || url, url, snippet: text(fields[snippetField]) });
    if (out.length >= limit) break;
  }
  return out;
}

/**
 * The results in a provider's JSON answer. A job of the CPU pool (src/workers/): the answer is up to 2 MiB of JSON
 * shaped by whatever the provider indexed, so it is parsed and narrowed off the event loop.
 */
export function searchResultsOf(input: { body: string; provider: WebSearchConfig['provider']; limit: number }) {
  const { body, provider, limit } = input;
  let answer: Record<string, unknown> | null;
  try {
    answer = record(JSON.parse(body));
  } catch {
    throw new Error(`the search provider (${provider}) did not answer JSON`);
  }
  if (provider === 'brave') return results(record(answer?.web)?.results ?? [], 'description', limit);
  return results(answer?.results, 'content', limit);
}

/** The answer's text, read at most MAX_ANSWER_BYTES (the rest is never read). */
async function answerOf(response: Response, provider: string): Promise<string> {
  if (!response.ok) {
    const read = await readBounded(response, 300).catch(() => ({ body: Buffer.alloc(0) }));
    const detail = read.body.toString('utf8').trim();
    throw new Error(`the search provider (${provider}) answered HTTP ${response.status}${detail ? `: ${detail}` : ''}`);
  }
  const read = await readBounded(response, MAX_ANSWER_BYTES);
  if (read.truncated) throw new Error(`the search provider (${provider}) answered more than ${MAX_ANSWER_BYTES} bytes`);
  return read.body.toString('utf8');
}

export interface SearchDeps {
  config: WebSearchConfig;
  fetch: EgressFetch;
  cpu: CpuWork;
}

/** Runs `query` on the configured provider and returns at most `config.results` results. */
export async function webSearch(search: SearchDeps, query: string, signal: AbortSignal): Promise<SearchResult[]> {
  const { config, fetch: fetcher } = search;
  const endpoint = config.url ?? DEFAULT_SEARCH_URLS[config.provider];
  if (endpoint === null) throw new Error('the search provider has no URL (AGENTRY_WEB_SEARCH_URL)');
  const { provider } = config;
  let response: Response;
  if (provider === 'searxng') {
    const base = endpoint.replace(/\/+$/, '');
    const url = new URL(base.endsWith('/search') ? base : `${base}/search`);
    url.searchParams.set('q', query);
    url.searchParams.set('format', 'json');
    const headers: Record<string, string> = { accept: 'application/json' };
    if (config.apiKey !== null) headers.authorization = `Bearer ${config.apiKey}`;
    response = await fetcher(url, { headers, signal });
  } else if (provider === 'brave') {
    const url = new URL(endpoint);
    url.searchParams.set('q', query);
    url.searchParams.set('count', String(Math.min(config.results, 20)));
    const headers: Record<string, string> = { accept: 'application/json', 'x-subscription-token': config.apiKey ?? '' };
    response = await fetcher(url, { headers, signal });
  } else {
    response = await fetcher(endpoint, {
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: `Bearer ${config.apiKey ?? ''}` },
      body: JSON.stringify({ query, max_results: config.results }),
      signal,
    });
  }
  const body = await answerOf(response, provider);
  try {
    return await search.cpu.run('searchResults', { body, provider, limit: config.results }, { signal });
  } catch (error) {
    if (error instanceof CpuJobError && error.code !== 'failed') {
      throw new Error(`the answer of the search provider (${provider}) could not be read: ${error.message}`);
    }
    throw error;
  }
}
