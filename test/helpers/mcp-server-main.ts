/**
 * Runs one test MCP server as its own process, for tests that kill or restart the process under test while the
 * server (and what it has counted) lives on. Prints `listening on <url>` once ready; GET <origin>/_state returns
 * what it has observed (calls, cancellations, counts, list requests) as JSON; SIGTERM/SIGINT close it.
 *
 *   node test/helpers/mcp-server-main.ts --kind modern|legacy|sse [--name n] [--auth 'Bearer x'] [--port 0]
 *     [--ttl-ms 60000] [--page-size 2] [--only echo,count] [--rename echo=search,add=plus]
 *
 * Every flag may instead come from the environment as MCP_TEST_<FLAG> (e.g. MCP_TEST_AUTH, MCP_TEST_TTL_MS),
 * which keeps secrets out of the process list.
 */
import { parseArgs } from 'node:util';
import { type McpTestServer, startLegacyMcpServer, startModernMcpServer } from './mcp-servers.ts';

const FLAGS = ['kind', 'name', 'auth', 'port', 'ttl-ms', 'page-size', 'only', 'rename'] as const;

const { values } = parseArgs({
  options: Object.fromEntries(FLAGS.map((flag) => [flag, { type: 'string' }])),
  strict: true,
});

function option(flag: (typeof FLAGS)[number]): string | undefined {
  const fromArgv = values[flag];
  if (typeof fromArgv === 'string') return fromArgv;
  return process.env[`MCP_TEST_${flag.toUpperCase().replace('-', '_')}`];
}

function numberOption(flag: (typeof FLAGS)[number]): number | undefined {
  const raw = option(flag);
  if (raw === undefined) return undefined;
  const value = Number(raw);
  if (!Number.isInteger(value) || value < 0) throw new Error(`--${flag} must be a non-negative integer`);
  return value;
}

function listOption(flag: (typeof FLAGS)[number]): string[] | undefined {
  return option(flag)
    ?.split(',')
    .map((item) => item.trim())
    .filter((item) => item !== '');
}

const kind = option('kind') ?? 'modern';
if (kind !== 'modern' && kind !== 'legacy' && kind !== 'sse') throw new Error('--kind must be modern, legacy or sse');
const name = option('name');
const auth = option('auth');
const port = numberOption('port');
const only = listOption('only');
const renames = listOption('rename');
const common = {
  ...(name === undefined ? {} : { name }),
  ...(auth === undefined ? {} : { auth }),
  ...(port === undefined ? {} : { port }),
  ...(only === undefined ? {} : { only }),
  ...(renames === undefined
    ? {}
    : { rename: Object.fromEntries(renames.map((pair) => [pair.split('=')[0] ?? '', pair.split('=')[1] ?? ''])) }),
};
const ttlMs = numberOption('ttl-ms');
const pageSize = numberOption('page-size');

const server: McpTestServer =
  kind === 'modern'
    ? await startModernMcpServer({ ...common, ...(ttlMs === undefined ? {} : { ttlMs }) })
    : await startLegacyMcpServer({
        ...common,
        transport: kind === 'sse' ? 'sse' : 'streamable',
        ...(pageSize === undefined ? {} : { pageSize }),
      });

process.stdout.write(`listening on ${server.url}\n`);

for (const signal of ['SIGTERM', 'SIGINT'] as const) {
  process.once(signal, () => {
    void server.close().finally(() => process.exit(0));
  });
}
