#!/usr/bin/env node
// Entry point of the `agentry` command and of `npm start`. Plain JavaScript that every Node.js can parse, so that
// under a Node.js too old for Agentry it runs itself again under the Node.js 24 that `npm install` brought (or
// says what to install) before any .ts file is loaded (static imports would be resolved first, hence the dynamic
// one).
import { useDependencyBundles } from './dependency-bundles.js';
import { runUnderSupportedNode } from './node-check.js';
import { startServerWithHeapSize } from './server-heap.js';

if (await runUnderSupportedNode()) {
  // `serve` first replaces this process with one whose V8 heap is sized for a server (server-heap.js).
  startServerWithHeapSize();
  // Node.js keeps what it made of each module (the code, and the TypeScript with its types stripped) in its compile
  // cache, so the next start reads it instead of doing it again: most of a start's time otherwise. The cache is
  // keyed by each file's content and holds code this process will run, so it lives in a folder only this user can
  // write (Node.js's default, the shared temp directory, would let another local user plant code there).
  // NODE_COMPILE_CACHE names another directory, NODE_DISABLE_COMPILE_CACHE=1 turns it off (docs/performance.md).
  const { enableCompileCache } = await import('node:module');
  const directory = process.env.NODE_COMPILE_CACHE || (await privateCacheDirectory());
  if (directory !== undefined) {
    const enabled = enableCompileCache(directory).directory;
    // Worker threads (and child processes) start with this process's environment: they use the same cache.
    if (enabled !== undefined) process.env.NODE_COMPILE_CACHE = enabled;
  }
  // TypeBox and Kysely from the bundles that `npm install` made of them, when they are there (dependency-bundles.js).
  await useDependencyBundles();
  await import('../src/cli/main.ts');
}

/** `$XDG_CACHE_HOME/agentry/compile-cache` (or `~/.cache/…`), made 0700; undefined when it is not this user's alone. */
async function privateCacheDirectory() {
  const { mkdirSync, statSync } = await import('node:fs');
  const { homedir } = await import('node:os');
  const { join } = await import('node:path');
  try {
    const base = process.env.XDG_CACHE_HOME || join(homedir(), '.cache');
    const directory = join(base, 'agentry', 'compile-cache');
    mkdirSync(directory, { recursive: true, mode: 0o700 });
    const stat = statSync(directory);
    const uid = process.getuid?.();
    if ((uid !== undefined && stat.uid !== uid) || (stat.mode & 0o022) !== 0) return undefined;
    return directory;
  } catch {
    return undefined;
  }
}
