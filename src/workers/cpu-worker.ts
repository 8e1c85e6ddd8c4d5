/**
 * The worker module of the server's CPU pool (cpu-pool.ts, `createCpuWork`): the jobs that parse or convert
 * untrusted input of unbounded shape, where the cost can grow faster than the input (Readability is roughly cubic
 * in nesting depth; YAML's duplicate-key check is quadratic) or the recursion can overflow the stack.
 */
import { readablePage } from '../tools/builtin/readable-page.ts';
import { searchResultsOf } from '../tools/builtin/search-providers.ts';
import { parseSkillInfo } from '../tools/builtin/skill-sources.ts';
import { serveCpuJobs } from './serve-jobs.ts';

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
