/**
 * Deadlines of the test helpers, in one place and without imports (child processes of the tests load helpers too).
 * A passing wait ends as soon as its condition holds, so a deadline costs nothing; they are generous so that a
 * loaded machine makes a test slow, not failing. Speed is measured in bench/, never asserted in tests.
 */

/** The deadline of a wait for a condition (waitUntil, a receiver's or an MCP test server's waitFor). */
export const WAIT_MS = 60_000;

/**
 * How long a child process (the server, the CLI, a test MCP server, the browser) gets to start. A start takes about
 * a second on an idle machine and has been seen to take 20-60 s on a loaded 2-core one.
 */
export const START_TIMEOUT_MS = 120_000;
