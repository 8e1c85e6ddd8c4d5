/**
 * One `git clone` of a skill repository, through the egress guard and within bounds.
 *
 * git resolves names itself, so it is handed the address the guard checked: for http(s), curl's resolve table
 * (`http.curloptResolve`) pins the name to that address (TLS still verifies the name); for `git://`, the URL names
 * the address. Only the URL's own protocol may be spoken (`protocol.allow`), redirects are not followed, and git
 * runs with no system or user configuration, no hooks, no credential prompts and no proxy from the environment.
 * The host is the operator's (AGENTRY_SKILLS_GIT_URL, `{repo}` only in the path), so like a toolkit's it may be
 * private or on this host: what the guard adds is that the address checked is the address used.
 *
 * Bounds: the time (`timeoutMs`); what is downloaded (the clone's folder is measured while git runs, and again at
 * the end: at most `maxBytes`); what a checkout would write (the tree is listed first: at most MAX_REPO_FILES files
 * and `maxBytes` in all, or nothing is checked out).
 */
import { execFile } from 'node:child_process';
import { lstat, readdir } from 'node:fs/promises';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { type Resolver, resolveDestination } from '../../lib/egress.ts';

export const MAX_REPO_FILES = 20_000;
/** How often the clone's folder is measured while git downloads. */
const WATCH_MS = 200;

export interface CloneOptions {
  git: string;
  url: string;
  /** The folder to clone into (must not exist). */
  into: string;
  /** git's HOME (nothing of the server's). */
  home: string;
  timeoutMs: number;
  maxBytes: number;
  resolver?: Resolver | undefined;
  signal: AbortSignal;
}

/** The URL to give git and the configuration that pins it to the checked address. */
export async function pinnedCloneUrl(
  url: string,
  resolver: Resolver | undefined,
): Promise<{ url: string; config: string[] }> {
  const parsed = new URL(url);
  const scheme = parsed.protocol.slice(0, -1);
  const config = ['-c', 'protocol.allow=never', '-c', `protocol.${scheme}.allow=always`];
  if (scheme === 'file') return { url, config };
  // The guard judges a host, whatever the scheme: an http URL of the same host stands for it.
  const destination = await resolveDestination(`http://${parsed.host}/`, { allowInsecure: true, resolver });
  const literal = destination.family === 6 ? `[${destination.address}]` : destination.address;
  if (scheme === 'git') {
    parsed.hostname = literal;
    return { url: parsed.href, config };
  }
  const pins = parsed.hostname.startsWith('[') || parsed.hostname === destination.address ? [] : [literal];
  const port = parsed.port === '' ? (scheme === 'https' ? '443' : '80') : parsed.port;
  return {
    url,
    config: [
      ...config,
      '-c',
      'http.followRedirects=false',
      ...pins.flatMap((address) => ['-c', `http.curloptResolve=${parsed.hostname}:${port}:${address}`]),
    ],
  };
}

/** Bytes of regular files under `dir` (symlinks not followed). */
async function folderBytes(dir: string): Promise<number> {
  let total = 0;
  const entries = await readdir(dir, { withFileTypes: true }).catch(() => []);
  for (const entry of entries) {
    const path = join(dir, entry.name);
    if (entry.isDirectory()) total += await folderBytes(path);
    else if (entry.isFile()) total += (await lstat(path).catch(() => null))?.size ?? 0;
  }
  return total;
}

/** What `git ls-tree -r -l -z` lists: the files a checkout writes, and their bytes. */
export function treeSize(listing: string): { files: number; bytes: number } {
  let files = 0;
  let bytes = 0;
  for (const entry of listing.split('\0')) {
    const match = /^\d+ blob [0-9a-f]+ +(\d+)\t/.exec(entry);
    if (match?.[1] === undefined) continue;
    files++;
    bytes += Number(match[1]);
  }
  return { files, bytes };
}

/** Clones `url` into `into` as the file header says; rejects with an Error saying why it did not. */
export async function cloneRepository(options: CloneOptions): Promise<void> {
  const run = promisify(execFile);
  const env = {
    PATH: '/usr/local/bin:/usr/bin:/bin',
    HOME: options.home,
    GIT_TERMINAL_PROMPT: '0',
    GIT_CONFIG_NOSYSTEM: '1',
    GIT_CONFIG_GLOBAL: '/dev/null',
    GIT_ASKPASS: '/bin/false',
  };
  const tooLarge = () =>
    new Error(`the repository is larger than ${options.maxBytes} bytes (AGENTRY_SKILLS_GIT_MAX_BYTES)`);
  const { url, config } = await pinnedCloneUrl(options.url, options.resolver);
  const watch = new AbortController();
  const signal = AbortSignal.any([options.signal, watch.signal]);
  let watching = true;
  const measure = async () => {
    while (watching) {
      await new Promise((resolve) => setTimeout(resolve, WATCH_MS));
      if (watching && (await folderBytes(options.into)) > options.maxBytes) watch.abort(tooLarge());
    }
  };
  const watcher = measure();
  try {
    await run(
      options.git,
      [
        '-c',
        'core.hooksPath=/dev/null',
        ...config,
        'clone',
        '--depth',
        '1',
        '--no-tags',
        '--no-checkout',
        '--quiet',
        '--',
        url,
        options.into,
      ],
      { signal, timeout: options.timeoutMs, maxBuffer: 1024 * 1024, env },
    );
  } catch (error) {
    if (watch.signal.aborted) throw watch.signal.reason;
    throw error;
  } finally {
    watching = false;
    await watcher;
  }
  if ((await folderBytes(options.into)) > options.maxBytes) throw tooLarge();
  const git = (args: string[], maxBuffer = 1024 * 1024) =>
    run(options.git, ['-c', 'core.hooksPath=/dev/null', '-C', options.into, ...args], {
      signal: options.signal,
      timeout: options.timeoutMs,
      maxBuffer,
      env,
    });
  const listing = await git(['ls-tree', '-r', '-l', '-z', 'HEAD'], 64 * 1024 * 1024);
  const tree = treeSize(listing.stdout);
  if (tree.files > MAX_REPO_FILES) throw new Error(`the repository has more than ${MAX_REPO_FILES} files`);
  if (tree.bytes > options.maxBytes) throw tooLarge();
  await git(['checkout', '--quiet', '--force', 'HEAD']);
}
