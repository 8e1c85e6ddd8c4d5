#!/usr/bin/env node
// Entry point of the `agentry` command and of `npm start`. Plain JavaScript that every Node.js can parse, so that
// under a Node.js too old for Agentry it runs itself again under the Node.js 24 that `npm install` brought (or
// says what to install) before any .ts file is loaded (static imports would be resolved first, hence the dynamic
// one).
import { runUnderSupportedNode } from './node-check.js';

if (await runUnderSupportedNode()) {
  // Node.js keeps what it made of each module (the code, and the TypeScript with its types stripped) in its compile
  // cache, so the next start reads it instead of doing it again: most of a start's time otherwise. The cache is
  // keyed by each file's content; NODE_COMPILE_CACHE names another directory, NODE_DISABLE_COMPILE_CACHE=1 turns it
  // off (docs/performance.md).
  const { enableCompileCache } = await import('node:module');
  const { directory } = enableCompileCache();
  // Worker threads (and child processes) start with this process's environment: they use the same cache.
  if (directory !== undefined) process.env.NODE_COMPILE_CACHE = directory;
  await import('../src/cli/main.ts');
}
