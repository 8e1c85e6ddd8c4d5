import { describe, expect, it } from 'vitest';
import { renderOpenApiMarkdown } from './openapi-markdown.ts';

/** Shaped like @fastify/swagger output for OpenAPI 3.1: nullability as type arrays or `anyOf` with null. */
const document = {
  openapi: '3.1.0',
  info: { title: 'Agentry API', version: '0.1.0', description: 'Self-hosted agent platform.' },
  components: {
    securitySchemes: {
      bearerAuth: { type: 'http', scheme: 'bearer', description: 'API key as a bearer token.' },
      adminKey: { type: 'apiKey', in: 'header', name: 'X-Admin-Key' },
    },
    schemas: {
      Agent: {
        type: 'object',
        required: ['id', 'name'],
        properties: {
          id: { type: 'string', pattern: '^agt_[a-z0-9]+$' },
          name: { type: 'string', minLength: 1, maxLength: 64 },
          parent: { $ref: '#/components/schemas/Agent' },
        },
      },
      Error: {
        type: 'object',
        properties: { error: { type: 'object', properties: { code: { type: 'string' } } } },
      },
      NetworkPolicy: {
        type: 'object',
        required: ['allow_network_egress'],
        properties: {
          allow_network_egress: {
            type: 'boolean',
            default: false,
            description: 'Whether tools may reach the internet.',
          },
          allowed_hosts: { type: 'array', items: { type: 'string', format: 'hostname' }, maxItems: 32 },
        },
      },
    },
  },
  security: [{ bearerAuth: [] }],
  tags: [{ name: 'Agents', description: 'Create and inspect agents.' }],
  paths: {
    '/v1/health': {
      get: { tags: ['System'], summary: 'Liveness probe', security: [], responses: { '200': { description: 'OK' } } },
    },
    '/v1/agents/{agent_id}': {
      get: {
        tags: ['Agents'],
        summary: 'Get an agent',
        parameters: [
          { name: 'agent_id', in: 'path', required: true, schema: { type: 'string' }, description: 'Agent id.' },
          {
            name: 'include',
            in: 'query',
            schema: { type: 'array', items: { type: 'string', enum: ['tools', 'stats'] } },
          },
          { name: 'limit', in: 'query', schema: { type: 'integer', minimum: 1, maximum: 100, default: 20 } },
        ],
        responses: {
          '200': {
            description: 'The agent',
            content: { 'application/json': { schema: { $ref: '#/components/schemas/Agent' } } },
          },
          '404': {
            description: 'Not found',
            content: { 'application/json': { schema: { $ref: '#/components/schemas/Error' } } },
          },
        },
      },
    },
    '/v1/agents': {
      // Declared out of method order on purpose: rendering must order get before post.
      post: {
        tags: ['Agents'],
        summary: 'Create an agent',
        description: 'Creates an agent.\nReturns it.',
        requestBody: {
          required: true,
          content: {
            'application/json': {
              schema: {
                type: 'object',
                required: ['name', 'model'],
                properties: {
                  name: { type: 'string', minLength: 1, maxLength: 64, description: 'Display\nname.' },
                  model: { type: 'string', pattern: '^(openai|anthropic)/.+$' },
                  mode: { type: 'string', enum: ['chat', 'task|batch'] },
                  // TypeBox literal union after @fastify/swagger's const-to-enum conversion.
                  kind: {
                    anyOf: [
                      { type: 'string', enum: ['assistant'] },
                      { type: 'string', enum: ['worker'] },
                    ],
                  },
                  instructions: { anyOf: [{ type: 'string', maxLength: 10000 }, { type: 'null' }] },
                  temperature: { type: ['number', 'null'], minimum: 0, maximum: 2 },
                  networkPolicy: { $ref: '#/components/schemas/NetworkPolicy' },
                  tools: {
                    type: 'array',
                    maxItems: 8,
                    items: {
                      type: 'object',
                      required: ['type'],
                      properties: { type: { type: 'string', const: 'function' }, name: { type: 'string' } },
                    },
                  },
                  parent: { $ref: '#/components/schemas/Agent' },
                },
              },
            },
          },
        },
        responses: {
          '201': {
            description: 'Created',
            content: { 'application/json': { schema: { $ref: '#/components/schemas/Agent' } } },
          },
          '400': {
            description: 'Invalid request',
            content: { 'application/json': { schema: { $ref: '#/components/schemas/Error' } } },
          },
        },
      },
      get: {
        tags: ['Agents'],
        summary: 'List agents',
        security: [{ adminKey: [] }, {}],
        responses: { '200': { description: 'OK' } },
      },
    },
    '/v1/untagged': { delete: { responses: { '204': { description: 'Deleted' } } } },
  },
};

const markdown = renderOpenApiMarkdown(document);
const lines = markdown.split('\n');

/** The lines following a heading, up to the next heading, so assertions are scoped to one operation. */
function section(heading: string): string[] {
  const start = lines.indexOf(heading);
  expect(start, `missing heading ${heading}`).toBeGreaterThanOrEqual(0);
  const rest = lines.slice(start + 1);
  const end = rest.findIndex((line) => line.startsWith('#'));
  return end === -1 ? rest : rest.slice(0, end);
}

describe('renderOpenApiMarkdown', () => {
  it('starts with the title, version and description', () => {
    expect(lines[0]).toBe('# Agentry API 0.1.0');
    expect(lines).toContain('Self-hosted agent platform.');
  });

  it('lists security schemes with their scheme or header', () => {
    const auth = section('## Authentication');
    expect(auth).toContain('| `bearerAuth` | http | bearer | API key as a bearer token. |');
    expect(auth).toContain('| `adminKey` | apiKey | header `X-Admin-Key` |  |');
  });

  it('groups by first tag in order of appearance, untagged last, methods in canonical order', () => {
    const headings = lines.filter((line) => /^#{2,3} /.test(line));
    expect(headings).toEqual([
      '## Authentication',
      '## System',
      '### GET /v1/health',
      '## Agents',
      '### GET /v1/agents/{agent_id}',
      '### GET /v1/agents',
      '### POST /v1/agents',
      '## Other',
      '### DELETE /v1/untagged',
    ]);
    expect(section('## Agents')).toContain('Create and inspect agents.');
  });

  it('states the security of each operation', () => {
    expect(section('### GET /v1/health')).toContain('**Security:** No authentication');
    expect(section('### POST /v1/agents')).toContain('**Security:** `bearerAuth`');
    expect(section('### GET /v1/agents')).toContain('**Security:** `adminKey` or no authentication');
  });

  it('renders parameters with types derived from their schema', () => {
    const get = section('### GET /v1/agents/{agent_id}');
    expect(get).toContain('| name | in | type | required | description |');
    expect(get).toContain('| `agent_id` | path | string | yes | Agent id. |');
    expect(get).toContain('| `include` | query | string[] | no | each one of: `tools`, `stats` |');
    expect(get).toContain('| `limit` | query | integer | no | range 1..100; default: `20` |');
  });

  it('renders the request body fields with constraints, nesting and escaped pipes', () => {
    const post = section('### POST /v1/agents');
    expect(post).toContain('Creates an agent.\nReturns it.'.split('\n')[0]);
    expect(post).toContain('**Request body** (required)');
    expect(post).toContain('Content type: `application/json` (object)');
    expect(post).toContain('| field | type | required | description |');
    expect(post).toContain('| `name` | string | yes | Display name. (length 1..64) |');
    expect(post).toContain('| `model` | string | yes | pattern: `^(openai\\|anthropic)/.+$` |');
    expect(post).toContain('| `mode` | string | no | one of: `chat`, `task\\|batch` |');
    expect(post).toContain('| `kind` | "assistant" \\| "worker" | no |  |');
    expect(post).toContain('| `instructions` | string \\| null | no | length <= 10000 |');
    expect(post).toContain('| `temperature` | number \\| null | no | range 0..2 |');
    expect(post).toContain('| `networkPolicy` | NetworkPolicy | no |  |');
    expect(post).toContain(
      '| `networkPolicy.allow_network_egress` | boolean | yes | Whether tools may reach the internet. (default: `false`) |',
    );
    expect(post).toContain('| `networkPolicy.allowed_hosts` | string[] | no | items <= 32; each format: hostname |');
    expect(post).toContain('| `tools` | object[] | no | items <= 8 |');
    expect(post).toContain('| `tools[].type` | "function" | yes |  |');
    expect(post).toContain('| `tools[].name` | string | no |  |');
  });

  it('names $ref schemas and follows them only one level, without looping on cycles', () => {
    const post = section('### POST /v1/agents');
    expect(post).toContain('| `parent` | Agent | no |  |');
    expect(post).toContain('| `parent.parent` | Agent | no |  |');
    expect(post.some((line) => line.startsWith('| `parent.parent.'))).toBe(false);
  });

  it('renders responses with status, description and content type', () => {
    const post = section('### POST /v1/agents');
    expect(post).toContain('| status | description | content type |');
    expect(post).toContain('| 201 | Created | `application/json` (Agent) |');
    expect(post).toContain('| 400 | Invalid request | `application/json` (Error) |');
    expect(section('### DELETE /v1/untagged')).toContain('| 204 | Deleted |  |');
  });

  it('follows self-referencing schemas to any depth without recursing forever', () => {
    const cyclic = {
      info: { title: 'Cyclic', version: '1' },
      components: { schemas: { Node: { $ref: '#/components/schemas/Node' } } },
      paths: {
        '/n': {
          post: {
            requestBody: { content: { 'application/json': { schema: { $ref: '#/components/schemas/Node' } } } },
            responses: {},
          },
        },
      },
    };
    expect(renderOpenApiMarkdown(cyclic)).toContain('Content type: `application/json` (Node)');
  });

  it('is deterministic', () => {
    expect(renderOpenApiMarkdown(structuredClone(document))).toBe(markdown);
  });

  it('does not throw on degenerate input and still emits a title line', () => {
    for (const input of [{}, null, undefined, 42, 'x', [], { info: { title: 'Empty', version: '2' } }]) {
      const output = renderOpenApiMarkdown(input);
      expect(output.split('\n')[0]).toMatch(/^# \S/);
    }
    expect(renderOpenApiMarkdown({ info: { title: 'Empty', version: '2' }, paths: {} })).toBe('# Empty 2\n');
    expect(
      renderOpenApiMarkdown({ paths: { '/x': { get: { parameters: [{ $ref: '#/%E0%A4%A' }], responses: 7 } } } }),
    ).toContain('### GET /x');
  });
});
