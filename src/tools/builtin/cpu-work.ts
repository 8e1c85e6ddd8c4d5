/**
 * The server's CPU pool (workers/cpu-pool.ts) running the built-in tools' jobs (cpu-jobs.ts, its worker module):
 * pages to read, search answers to narrow, skill front matter to parse. Built once by the composition root.
 */
import type { Logger } from 'pino';
import type { CpuPoolConfig } from '../../config.ts';
import { type CpuPool, createCpuPool } from '../../workers/cpu-pool.ts';
import type { CpuJobs } from './cpu-jobs.ts';

export type CpuWork = CpuPool<CpuJobs>;

export const createCpuWork = (limits: CpuPoolConfig, logger?: Pick<Logger, 'warn'>): CpuWork =>
  createCpuPool<CpuJobs>(new URL('./cpu-jobs.ts', import.meta.url), limits, logger);
