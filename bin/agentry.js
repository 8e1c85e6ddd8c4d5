#!/usr/bin/env node
// Entry point of the `agentry` command: the CLI is TypeScript that Node runs directly (type stripping).
import '../src/cli/main.ts';
