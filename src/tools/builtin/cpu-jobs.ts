/**
 * The worker module of the server's CPU pool (cpu-work.ts, `createCpuWork`): the jobs that parse or convert
 * untrusted input of unbounded shape, where the cost can grow faster than the input (Readability is roughly cubic
 * in nesting depth; YAML's duplicate-key check is quadratic) or the recursion can overflow the stack.
 */
import { serveCpuJobs } from '../../workers/serve-jobs.ts';
import { readablePage } from './readable-page.ts';
import { searchResultsOf } from './search-providers.ts';
import { parseSkillInfo } from './skill-sources.ts';

const CPU_JOBS = {
  /** A fetched web page as title, Markdown and links (`web_browse`). */
  readablePage: (input: { html: string; url: string; maxLinks: number }) =>
    readablePage(input.html, input.url, { maxLinks: input.maxLinks }),
  /** A search provider's JSON answer narrowed to results (`web_search`). */
  searchResults: searchResultsOf,
  /** Name and description from a skill's SKILL.md front matter (YAML from any repository an agent names). */
  skillInfo: (input: { markdown: string; fallbackName: string }) => parseSkillInfo(input.markdown, input.fallbackName),
};

export type CpuJobs = typeof CPU_JOBS;

serveCpuJobs(CPU_JOBS);
