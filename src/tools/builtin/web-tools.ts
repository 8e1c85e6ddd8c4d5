/**
 * The `web_search_&_browse` internal tool. `web_browse {url}` fetches a page under the agent's network policy
 * (policy-fetch.ts, like `http_request`) and returns it readable: title, main text as Markdown, links
 * (readable-page.ts, run in the CPU pool: a hostile page can cost minutes of CPU or overflow the stack, and then
 * the tool reports which limit ended it). `web_search {query}` asks the search provider the operator configured
 * (search-providers.ts); without one it is not offered and every accepted message says so, while `web_browse`
 * still is. A search sends the query out of the deployment, so it is refused for an agent whose policy allows no
 * egress at all.
 */
import { Type } from 'typebox';
import { CpuJobError } from '../../workers/cpu-pool.ts';
import { egressEnabled } from '../network/network-policy.ts';
import type { ResolvedTool, ToolOutput, ToolProvider, ToolSource } from '../types.ts';
import type { CpuWork } from './cpu-work.ts';
import { builtinTool, internalEntry, toolError } from './define-tool.ts';
import { egressOffWarning, isBinaryBody, type NetworkToolDeps, networkOutcome } from './http-client.ts';
import type { PolicyResponse } from './policy-fetch.ts';
import { fetchUnderPolicy } from './policy-fetch.ts';
import type { ReadablePage } from './readable-page.ts';
import { type SearchDeps, webSearch } from './search-providers.ts';

export interface WebToolDeps extends NetworkToolDeps {
  /** Page extraction runs there, off the event loop. */
  cpu: CpuWork;
  search: SearchDeps | null;
}

/** HTML kept for extraction: pages are larger than the text they hold. */
const MAX_PAGE_BYTES = 5 * 1024 * 1024;
/** Text returned to the model. */
export const MAX_PAGE_CHARS = 100_000;
const MAX_LINKS = 100;
const HTML_TYPES = /^(text\/html|application\/xhtml\+xml)/i;
const TEXT_TYPES = /^(text\/|application\/(json|xml|javascript|ld\+json)|[^;]*\+(json|xml))/i;

function cut(text: string, max: number): string {
  if (text.length <= max) return text;
  return `${text.slice(0, max)}\n[text truncated: the first ${max} of ${text.length} characters are shown]`;
}

/** The model-facing text of one browsed page; the HTML is extracted in the CPU pool (`signal` cancels that). */
async function describePage(response: PolicyResponse, cpu: CpuWork, signal: AbortSignal): Promise<ToolOutput> {
  const isError = response.status >= 400;
  const type = response.headers.find(([name]) => name === 'content-type')?.[1] ?? null;
  const lines = response.redirects.map((hop) => `redirected: ${hop.status} ${hop.from} -> ${hop.to}`);
  if (response.unfollowed !== null) {
    lines.push(`[redirect to ${response.unfollowed.location} not followed: ${response.unfollowed.reason}]`);
  }
  if (response.status >= 400) lines.push(`HTTP ${response.status} ${response.statusText}`.trim());
  if (isBinaryBody(type, response.body) || (type !== null && !HTML_TYPES.test(type) && !TEXT_TYPES.test(type))) {
    lines.push(`URL: ${response.url}`, `[${type ?? 'unknown content'}: not a page that can be read as text]`);
    return { output: lines.join('\n'), isError };
  }
  const raw = response.body.toString('utf8');
  const truncated = response.truncated
    ? `\n[the page is larger than ${MAX_PAGE_BYTES} bytes; only its start was read]`
    : '';
  if (type !== null && !HTML_TYPES.test(type) && !/^\s*</.test(raw)) {
    lines.push(`URL: ${response.url}`, '', cut(raw, MAX_PAGE_CHARS) + truncated);
    return { output: lines.join('\n'), isError };
  }
  let page: ReadablePage;
  try {
    page = await cpu.run('readablePage', { html: raw, url: response.url, maxLinks: MAX_LINKS }, { signal });
  } catch (error) {
    if (!(error instanceof CpuJobError)) throw error;
    return toolError(`the page at ${response.url} could not be extracted: ${error.message}`);
  }
  lines.push(`Title: ${page.title || '(none)'}`, `URL: ${response.url}`, '');
  lines.push(cut(page.text === '' ? '(no readable text)' : page.text, MAX_PAGE_CHARS) + truncated);
  if (page.links.length > 0) {
    lines.push('', 'Links:', ...page.links.map((link) => `- ${link.text}: ${link.url}`));
  }
  return { output: lines.join('\n'), isError };
}

function browseTool(deps: WebToolDeps): ResolvedTool {
  return builtinTool({
    name: 'web_browse',
    server: 'web_search_&_browse',
    changes: () => false,
    description:
      'Open a web page and read it: its title, its main text (as Markdown) and its links. Only sites your network policy allows can be opened.',
    parameters: Type.Object(
      { url: Type.String({ minLength: 1, maxLength: 8192, description: 'Absolute http or https URL of the page' }) },
      { additionalProperties: false },
    ),
    run: async (args, context) =>
      networkOutcome(async () => {
        const response = await fetchUnderPolicy(
          deps.fetch,
          {
            method: 'GET',
            url: args.url,
            headers: { accept: 'text/html,application/xhtml+xml,text/plain;q=0.9,*/*;q=0.5' },
          },
          {
            policy: context.egress.policy,
            limits: { ...deps.limits, maxResponseBytes: MAX_PAGE_BYTES },
            signal: context.signal,
          },
        );
        return describePage(response, deps.cpu, context.signal);
      }),
  });
}

function searchTool(search: SearchDeps): ResolvedTool {
  return builtinTool({
    name: 'web_search',
    server: 'web_search_&_browse',
    changes: () => false,
    description: 'Search the web. Returns titles, URLs and snippets; open a result with web_browse.',
    parameters: Type.Object(
      { query: Type.String({ minLength: 1, maxLength: 2000, description: 'What to search for' }) },
      { additionalProperties: false },
    ),
    async run(args, context) {
      if (!egressEnabled(context.egress.policy)) {
        return toolError("refused: the agent's network policy allows no network access");
      }
      const found = await webSearch(search, args.query, context.signal);
      if (found.length === 0) return { output: `no results for ${JSON.stringify(args.query)}`, isError: false };
      const output = found
        .map((result, index) =>
          [
            `${index + 1}. ${result.title}`,
            `   ${result.url}`,
            ...(result.snippet ? [`   ${result.snippet}`] : []),
          ].join('\n'),
        )
        .join('\n');
      return { output, isError: false };
    },
  });
}

export function createWebToolsProvider(deps: WebToolDeps): ToolProvider {
  const label = 'internal tool "web_search_&_browse"';
  const browse = browseTool(deps);
  const search = deps.search === null ? null : searchTool(deps.search);
  return {
    name: 'web_search_&_browse',
    claims: internalEntry('web_search_&_browse'),
    async sources(agent, claimed) {
      if (claimed.length === 0) return [];
      const sources: ToolSource[] = [
        { label, available: true, load: async () => ({ tools: search === null ? [browse] : [browse, search] }) },
      ];
      if (search === null) {
        sources.push({
          label: 'web_search',
          available: false,
          warning: {
            code: 'tool_unavailable',
            message: `${label}: web_search is not offered because this deployment has no search provider configured (AGENTRY_WEB_SEARCH_PROVIDER); web_browse works`,
          },
        });
      }
      return [...sources, ...egressOffWarning(label, agent.networkPolicy)];
    },
  };
}
