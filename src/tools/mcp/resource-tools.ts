/**
 * The resource tools of a connector whose server offers resources: `<server>__list_resources` (a page of the
 * server's resources, `cursor` for the next) and `<server>__read_resource` (one resource by URI, `offset` to read
 * a long text on). What they return is bounded as resources.ts says. They reach the server the way its other tools
 * do (`run`: the pooled connection with the turn's credential), so an interrupt cancels the request and a
 * credential problem reads as `authorization_required`.
 */
import { qualifiedToolName } from '../naming.ts';
import type { ResolvedTool, ToolOrigin, ToolOutput } from '../types.ts';
import type { McpConnection } from './client.ts';
import { isRecord } from './content.ts';
import { contentText, listingText } from './resources.ts';

/** Runs one request on the server's connection and turns it into the tool's output. */
export type ConnectionRunner = (
  signal: AbortSignal,
  operation: (connection: McpConnection) => Promise<string>,
) => Promise<ToolOutput>;

export const LIST_RESOURCES = 'list_resources';
export const READ_RESOURCE = 'read_resource';

function refused(message: string): ToolOutput {
  return { output: message, isError: true };
}

export function resourceTools(origin: Omit<ToolOrigin, 'tool'>, run: ConnectionRunner): ResolvedTool[] {
  const server = origin.serverLabel;
  const tool = (name: string, description: string, parameters: Record<string, unknown>) => ({
    name: qualifiedToolName(server, name),
    description,
    parameters,
    strict: false,
    kind: 'server' as const,
    origin: { ...origin, tool: name },
    // Reading is not a change: approval rules that exempt reads exempt these.
    changes: () => false,
  });
  return [
    {
      ...tool(
        LIST_RESOURCES,
        `Lists the resources (files, documents, records) the MCP server "${server}" offers, one page at a time: URI, name, type, size.`,
        {
          type: 'object',
          properties: {
            cursor: { type: 'string', description: 'The cursor a previous page named, for the next page.' },
          },
          additionalProperties: false,
        },
      ),
      execute: (args, context) => {
        const cursor = isRecord(args) ? args.cursor : undefined;
        if (cursor !== undefined && typeof cursor !== 'string')
          return Promise.resolve(refused('cursor must be a string'));
        return run(context.signal, async (connection) =>
          listingText(await connection.listResources(cursor ?? null, context.signal)),
        );
      },
    },
    {
      ...tool(
        READ_RESOURCE,
        `Reads one resource of the MCP server "${server}" by its URI. Long text comes in parts: call again with the offset the answer names. Binary contents are described, not shown.`,
        {
          type: 'object',
          properties: {
            uri: { type: 'string', description: 'The URI of the resource (from the resource list).' },
            offset: { type: 'integer', minimum: 0, description: 'The character to start reading at (default 0).' },
          },
          required: ['uri'],
          additionalProperties: false,
        },
      ),
      execute: (args, context) => {
        const uri = isRecord(args) ? args.uri : undefined;
        const offset = isRecord(args) ? (args.offset ?? 0) : 0;
        if (typeof uri !== 'string' || uri === '') return Promise.resolve(refused('uri must be a non-empty string'));
        if (typeof offset !== 'number' || !Number.isInteger(offset) || offset < 0) {
          return Promise.resolve(refused('offset must be a whole number >= 0'));
        }
        return run(context.signal, async (connection) =>
          contentText(await connection.readResource(uri, context.signal), offset),
        );
      },
    },
  ];
}
