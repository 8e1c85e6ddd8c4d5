/** `agentry <command>` (bin/agentry.js): runs the command line and exits with its status (see cli.ts). */
import { runCommandLine } from './cli.ts';

process.exitCode = await runCommandLine(process.argv.slice(2), process);
