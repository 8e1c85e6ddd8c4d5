#!/usr/bin/env node
// Entry point of the `agentry` command and of `npm start`. Plain JavaScript that every Node.js can parse, so that
// under a Node.js too old for Agentry it runs itself again under the Node.js 24 that `npm install` brought (or
// says what to install) before any .ts file is loaded (static imports would be resolved first, hence the dynamic
// one).
import { runUnderSupportedNode } from './node-check.js';

if (await runUnderSupportedNode()) await import('../src/cli/main.ts');
