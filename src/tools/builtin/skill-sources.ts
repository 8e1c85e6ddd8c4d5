/**
 * Where an agent's skills come from, and how they reach its workspace. A skill entry `{repo: "owner/name", path}`
 * names a folder holding `SKILL.md`, looked up:
 * 1. in the operator's local skills root (AGENTRY_SKILLS_DIR), laid out `<owner>/<name>/<path>/`;
 * 2. else by `git clone` of the repository (AGENTRY_SKILLS_GIT_URL with `{repo}`), when the agent's network policy
 *    allows the clone's host (a `file:` URL is local and needs no network). A clone is shallow, made once per
 *    repository into `<data dir>/skill-repos/` (delete it there to take a newer version), through the egress
 *    guard and within size bounds (`skill-clone.ts`).
 * The skill's front matter (`name`, `description`) goes into the agent's instructions; its files are copied into
 * the workspace under `skills/<owner>/<name>/<path>/` when missing there. Only regular files and folders are
 * copied (a symlink in a cloned repository could point anywhere on this host), `.git` never, within count and size
 * bounds.
 */
import { randomBytes } from 'node:crypto';
import { access, constants, lstat, mkdir, readdir, readFile, realpath, rename, rm, stat } from 'node:fs/promises';
import { createRequire } from 'node:module';
import { join, resolve, sep } from 'node:path';
import type { Resolver } from '../../lib/egress.ts';
import { CpuJobError } from '../../workers/cpu-pool.ts';
import { policyAllows } from '../network/network-policy.ts';
import type { NetworkPolicy, Skill } from '../tool-config.ts';
import type { CpuWork } from './cpu-work.ts';
import { cloneRepository } from './skill-clone.ts';

export interface SkillSourceOptions {
  /** AGENTRY_SKILLS_DIR. */
  dir: string | null;
  /** AGENTRY_SKILLS_GIT_URL, with `{repo}`. */
  gitUrl: string | null;
  gitTimeoutMs: number;
  /** AGENTRY_SKILLS_GIT_MAX_BYTES: bound on what one clone downloads and checks out. */
  gitMaxBytes: number;
  /** Where clones are kept (`<data dir>/skill-repos`). */
  cacheDir: string;
  /** SKILL.md's front matter is parsed there, off the event loop. */
  cpu: CpuWork;
  /** Resolves the git host for the egress guard (default the system's). */
  resolver?: Resolver | undefined;
}

/** Where a skill can be had from, decided without calling out. */
export type SkillLocation =
  | { found: true; kind: 'local'; dir: string }
  | { found: true; kind: 'git'; url: string }
  | { found: false; reason: string };

export interface SkillInfo {
  name: string;
  description: string;
}

const MAX_NAME = 64;
const MAX_DESCRIPTION = 1024;
const MAX_FILES = 2000;
const MAX_TOTAL_BYTES = 50 * 1024 * 1024;
const GIT_LOCATIONS = ['/usr/bin/git', '/usr/local/bin/git', '/bin/git'];
const FRONT_MATTER = /^\uFEFF?---\r?\n([\s\S]*?)\r?\n(?:---|\.\.\.)\s*(?:\r?\n|$)/;

/** The folder a skill occupies in the workspace, relative to its root. */
export const workspaceSkillPath = (skill: Skill): string => `skills/${skill.repo}/${skill.path}`;

export const skillLabel = (skill: Skill): string => `skill ${skill.repo}/${skill.path}`;

function inside(root: string, ...parts: string[]): string | null {
  const base = resolve(root);
  const target = resolve(base, ...parts);
  return target.startsWith(`${base}${sep}`) ? target : null;
}

async function isFile(path: string): Promise<boolean> {
  return (await stat(path).catch(() => null))?.isFile() ?? false;
}

/** `yaml`, loaded by the first parse: only the CPU pool's workers parse skills (cpu-jobs.ts). */
let yaml: typeof import('yaml') | null = null;
function parseYaml(text: string): unknown {
  yaml ??= createRequire(import.meta.url)('yaml') as typeof import('yaml');
  // Warnings (an unknown tag…) would be printed to standard error for every turn.
  return yaml.parse(text, { logLevel: 'error' });
}

const collapse = (text: unknown, max: number): string =>
  typeof text === 'string' ? text.replace(/\s+/g, ' ').trim().slice(0, max) : '';

/**
 * `name` and `description` from SKILL.md's YAML front matter; the folder name when it has none. A job of the CPU
 * pool (src/workers/): the YAML comes from any repository an agent names, and parsing it is superlinear in places
 * (duplicate keys, tags) even within the 64 KiB read. `yaml` refuses alias expansion past 100 (its
 * `maxAliasCount` default), so a "billion laughs" document is an error, not a hang.
 */
export function parseSkillInfo(markdown: string, fallbackName: string): SkillInfo {
  const match = FRONT_MATTER.exec(markdown);
  let fields: unknown = null;
  if (match?.[1] !== undefined) {
    try {
      fields = parseYaml(match[1]);
    } catch {
      fields = null;
    }
  }
  const name = typeof fields === 'object' && fields !== null ? Reflect.get(fields, 'name') : undefined;
  const description = typeof fields === 'object' && fields !== null ? Reflect.get(fields, 'description') : undefined;
  return {
    name: collapse(name, MAX_NAME) || fallbackName.slice(0, MAX_NAME),
    description: collapse(description, MAX_DESCRIPTION),
  };
}

export interface SkillSources {
  /** Where `skill` can come from for an agent with `policy`, or why it cannot (cheap: no network). */
  locate(skill: Skill, policy: NetworkPolicy | null): Promise<SkillLocation>;
  /** The skill's folder on this host: the local one, or in a clone made now (once per repository). */
  materialize(location: SkillLocation & { found: true }, skill: Skill, signal: AbortSignal): Promise<string>;
  readInfo(dir: string, skill: Skill, signal: AbortSignal): Promise<SkillInfo>;
  /** The files of a skill folder to copy: paths relative to it, regular files only, within bounds. */
  files(dir: string): Promise<{ path: string; bytes: number }[]>;
}

export function createSkillSources(options: SkillSourceOptions): SkillSources {
  const cloning = new Map<string, Promise<string>>();
  let git: Promise<string | null> | null = null;

  async function findGit(): Promise<string | null> {
    for (const candidate of GIT_LOCATIONS) {
      if (
        await access(candidate, constants.X_OK).then(
          () => true,
          () => false,
        )
      )
        return candidate;
    }
    return null;
  }

  async function clone(repo: string, url: string, signal: AbortSignal): Promise<string> {
    const target = inside(options.cacheDir, ...repo.split('/'));
    if (target === null) throw new Error(`${repo} is not a repository name`);
    if ((await stat(target).catch(() => null))?.isDirectory()) return target;
    git ??= findGit();
    const binary = await git;
    if (binary === null) throw new Error('git is not installed on the server');
    await mkdir(options.cacheDir, { recursive: true, mode: 0o700 });
    const scratch = join(options.cacheDir, `.clone-${randomBytes(6).toString('hex')}`);
    try {
      await cloneRepository({
        git: binary,
        url,
        into: scratch,
        home: options.cacheDir,
        timeoutMs: options.gitTimeoutMs,
        maxBytes: options.gitMaxBytes,
        resolver: options.resolver,
        signal,
      });
      await mkdir(join(target, '..'), { recursive: true, mode: 0o700 });
      await rename(scratch, target).catch(async (error: unknown) => {
        // Another process cloned it first: theirs is as good.
        if (!(await stat(target).catch(() => null))?.isDirectory()) throw error;
      });
      return target;
    } catch (error) {
      if (signal.aborted) throw signal.reason;
      const stderr = typeof error === 'object' && error !== null ? Reflect.get(error, 'stderr') : undefined;
      const detail =
        typeof stderr === 'string' && stderr.trim() !== ''
          ? stderr.trim().split('\n').at(-1)
          : error instanceof Error
            ? error.message
            : String(error);
      throw new Error(`git clone of ${repo} failed: ${detail}`, { cause: error });
    } finally {
      await rm(scratch, { recursive: true, force: true });
    }
  }

  return {
    async locate(skill, policy) {
      if (options.dir !== null) {
        const dir = inside(options.dir, ...skill.repo.split('/'), ...skill.path.split('/'));
        if (dir !== null && (await isFile(join(dir, 'SKILL.md')))) return { found: true, kind: 'local', dir };
      }
      if (options.gitUrl === null) {
        return {
          found: false,
          reason:
            options.dir === null
              ? 'cannot be loaded: this deployment has no skills source (AGENTRY_SKILLS_DIR, AGENTRY_SKILLS_GIT_URL)'
              : `was not found in the skills directory (no ${skill.repo}/${skill.path}/SKILL.md) and cloning is not configured`,
        };
      }
      const url = options.gitUrl.replaceAll('{repo}', skill.repo);
      const parsed = new URL(url);
      const host = parsed.hostname.replace(/^\[|\]$/g, '');
      if (parsed.protocol !== 'file:' && !policyAllows(policy, host)) {
        return {
          found: false,
          reason: `is not in the local skills directory, and the agent's network policy does not allow ${host} to clone it from`,
        };
      }
      return { found: true, kind: 'git', url };
    },

    async materialize(location, skill, signal) {
      if (location.kind === 'local') return realpath(location.dir);
      let pending = cloning.get(skill.repo);
      if (pending === undefined) {
        pending = clone(skill.repo, location.url, signal).finally(() => cloning.delete(skill.repo));
        cloning.set(skill.repo, pending);
      }
      const root = await pending;
      const dir = inside(root, ...skill.path.split('/'));
      if (dir === null || !(await lstat(join(dir, 'SKILL.md')).catch(() => null))?.isFile()) {
        throw new Error(`${skill.repo} has no SKILL.md in ${skill.path}`);
      }
      // The folder must be inside the clone: a symlinked folder could lead anywhere on this host.
      const [real, realRoot] = await Promise.all([realpath(dir), realpath(root)]);
      if (!real.startsWith(`${realRoot}${sep}`))
        throw new Error(`${skill.repo}: ${skill.path} leads outside the repository`);
      return real;
    },

    async readInfo(dir, skill, signal) {
      const markdown = await readFile(join(dir, 'SKILL.md'), 'utf8');
      const fallbackName = skill.path.split('/').at(-1) ?? skill.path;
      try {
        return await options.cpu.run('skillInfo', { markdown: markdown.slice(0, 64 * 1024), fallbackName }, { signal });
      } catch (error) {
        if (!(error instanceof CpuJobError)) throw error;
        throw new Error(`the front matter of ${skill.repo}/${skill.path}/SKILL.md could not be read: ${error.message}`);
      }
    },

    async files(dir) {
      const out: { path: string; bytes: number }[] = [];
      let total = 0;
      async function walk(relative: string): Promise<void> {
        const names = (await readdir(join(dir, relative))).sort();
        for (const name of names) {
          if (name === '.git' || out.length >= MAX_FILES) continue;
          const path = relative === '' ? name : `${relative}/${name}`;
          const stats = await lstat(join(dir, path));
          if (stats.isDirectory()) await walk(path);
          else if (stats.isFile() && total + stats.size <= MAX_TOTAL_BYTES) {
            total += stats.size;
            out.push({ path, bytes: stats.size });
          }
        }
      }
      await walk('');
      return out;
    },
  };
}
