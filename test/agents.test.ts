/**
 * Agents API (spec 4.3, input rules of section 2, limits of section 8; DESIGN sections 4-5), end to end over the
 * real routes and storage, once per dialect. Every invalid input is tried on both POST and PATCH.
 */
import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createMcpServerStore } from '../src/domain/mcp-servers/mcp-server-store.ts';
import { createSecretBox } from '../src/lib/secret-box.ts';
import { createHarness, dialects, type Harness, type Response as HarnessResponse, json } from './helpers/harness.ts';

type Body = Record<string, unknown>;
/** An agent as the API returns it. */
type Json = Record<string, any>;

const str = (length: number, char = 'a') => char.repeat(length);
const uuid = (n: number) => `00000000-0000-4000-8000-${n.toString(16).padStart(12, '0')}`;
const range = <T>(count: number, make: (i: number) => T): T[] => Array.from({ length: count }, (_, i) => make(i));
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

const INTERNAL_NAMES = (
  'web_search_&_browse sandbox skills coding_agent ask_user_question report_builder company app_builder_contract ' +
  'github sound_studio speech_generator http_client'
).split(' ');

const MCP_URL = 'https://mcp.example.com/mcp';
const urlOfLength = (length: number) => `https://mcp.example.com/${str(length - 'https://mcp.example.com/'.length)}`;

const closed = (extra: Body = {}): Body => ({ type: 'object', additionalProperties: false, ...extra });
const tool = (extra: Body = {}): Body => ({
  type: 'function',
  name: 'lookup',
  description: 'Looks a word up',
  parameters: closed({ properties: { q: { type: 'string' } }, required: ['q'] }),
  strict: true,
  ...extra,
});
const without = (object: Body, key: string): Body =>
  Object.fromEntries(Object.entries(object).filter(([k]) => k !== key));
const skill = (extra: Body = {}): Body => ({ repo: 'acme/skills', path: 'tools/pdf', ...extra });
const policy = (extra: Body = {}): Body => ({ allow_network_egress: true, domain_allowlist: 'none', ...extra });

const mcp = (...servers: unknown[]) => ({ mcpServers: servers });
const tools = (...items: unknown[]) => ({ clientTools: items });
const skills = (...items: unknown[]) => ({ skills: items });
const net = (value: unknown) => ({ networkPolicy: value });
const url = (value: string, name = 'docs') => ({ type: 'url', name, url: value });

/** [label, fields (merged over a valid name on POST, sent as is on PATCH), expected param]. */
const invalid: [string, Body, string][] = [
  ['empty name', { name: '' }, 'name'],
  ['whitespace-only name', { name: ' \t\n ' }, 'name'],
  ['name of 101 chars', { name: str(101) }, 'name'],
  ['non-string name', { name: 5 }, 'name'],
  ['description of 501 chars', { description: str(501) }, 'description'],
  ['whitespace-only description', { description: '   ' }, 'description'],
  ['empty description', { description: '' }, 'description'],
  ['instructions of 100001 chars', { instructions: str(100_001) }, 'instructions'],
  ['unknown model provider', { model: 'nope/x' }, 'model'],
  ['unknown scripted model', { model: 'scripted/nope' }, 'model'],
  ['model without provider', { model: 'gpt-4.1' }, 'model'],
  ['empty model', { model: '' }, 'model'],
  ['maxSteps 0', { maxSteps: 0 }, 'maxSteps'],
  ['maxSteps 129', { maxSteps: 129 }, 'maxSteps'],
  ['maxSteps 1.5', { maxSteps: 1.5 }, 'maxSteps'],
  ['maxSteps as a string', { maxSteps: '5' }, 'maxSteps'],
  ['unknown top-level field', { colour: 'blue' }, 'colour'],
  // mcpServers
  ['mcpServers not an array', { mcpServers: 'sandbox' }, 'mcpServers'],
  ['mcpServers item not an object', mcp('sandbox'), 'mcpServers[0]'],
  ['internal with extra property', mcp({ kind: 'internal', name: 'sandbox', extra: 1 }), 'mcpServers[0].extra'],
  ['toolkit with extra property', mcp({ kind: 'composio', toolkit: 'gmail', extra: 1 }), 'mcpServers[0].extra'],
  ['custom with extra property', mcp({ kind: 'custom', serverId: uuid(1), extra: 1 }), 'mcpServers[0].extra'],
  ['url with extra property', mcp({ ...url(MCP_URL), extra: 1 }), 'mcpServers[0].extra'],
  ['url with a kind', mcp({ ...url(MCP_URL), kind: 'custom' }), 'mcpServers[0].kind'],
  ['unknown internal name', mcp({ kind: 'internal', name: 'gitlab' }), 'mcpServers[0].name'],
  ['internal without name', mcp({ kind: 'internal' }), 'mcpServers[0].name'],
  ['toolkit with leading space', mcp({ kind: 'composio', toolkit: ' gmail' }), 'mcpServers[0].toolkit'],
  ['toolkit with trailing space', mcp({ kind: 'composio', toolkit: 'gmail ' }), 'mcpServers[0].toolkit'],
  ['empty toolkit', mcp({ kind: 'composio', toolkit: '' }), 'mcpServers[0].toolkit'],
  ['toolkit of 301 chars', mcp({ kind: 'composio', toolkit: str(301) }), 'mcpServers[0].toolkit'],
  ['custom with non-uuid serverId', mcp({ kind: 'custom', serverId: 'srv_1' }), 'mcpServers[0].serverId'],
  ['custom without serverId', mcp({ kind: 'custom', name: 'x' }), 'mcpServers[0].serverId'],
  ['custom with name of 101 chars', mcp({ kind: 'custom', serverId: uuid(1), name: str(101) }), 'mcpServers[0].name'],
  ['url over http', mcp(url('http://mcp.example.com/mcp')), 'mcpServers[0].url'],
  ['url with credentials', mcp(url('https://user:pw@mcp.example.com/mcp')), 'mcpServers[0].url'],
  ['url with fragment', mcp(url('https://mcp.example.com/mcp#top')), 'mcpServers[0].url'],
  ['url to 127.0.0.1', mcp(url('https://127.0.0.1/mcp')), 'mcpServers[0].url'],
  ['url to 10.0.0.1', mcp(url('https://10.0.0.1/mcp')), 'mcpServers[0].url'],
  ['url to [::1]', mcp(url('https://[::1]/mcp')), 'mcpServers[0].url'],
  ['url to localhost', mcp(url('https://localhost/mcp')), 'mcpServers[0].url'],
  ['url to localhost. (trailing dot)', mcp(url('https://localhost./mcp')), 'mcpServers[0].url'],
  ['url to 169.254.169.254', mcp(url('https://169.254.169.254/latest')), 'mcpServers[0].url'],
  ['url of 2001 chars', mcp(url(urlOfLength(2001))), 'mcpServers[0].url'],
  ['url that is not a URL', mcp(url('mcp.example.com')), 'mcpServers[0].url'],
  ['url with empty name', mcp(url(MCP_URL, '')), 'mcpServers[0].name'],
  ['missing kind', mcp({ name: 'sandbox' }), 'mcpServers[0].kind'],
  ['unknown kind', mcp({ kind: 'zapier', toolkit: 'gmail' }), 'mcpServers[0].kind'],
  ['unknown type', mcp({ type: 'stdio', name: 'x', url: MCP_URL }), 'mcpServers[0].type'],
  [
    'same internal name twice',
    mcp(
      { kind: 'internal', name: 'sandbox' },
      { kind: 'internal', name: 'skills' },
      { kind: 'internal', name: 'sandbox' },
    ),
    'mcpServers[2]',
  ],
  ['same url twice', mcp(url(MCP_URL, 'a'), url(MCP_URL, 'b')), 'mcpServers[1]'],
  [
    'same toolkit twice',
    mcp({ kind: 'composio', toolkit: 'gmail' }, { kind: 'composio', toolkit: 'gmail' }),
    'mcpServers[1]',
  ],
  [
    'same custom server twice',
    mcp({ kind: 'custom', serverId: uuid(1) }, { kind: 'custom', serverId: uuid(1), name: 'x' }),
    'mcpServers[1]',
  ],
  ['65 mcpServers', mcp(...range(65, (i) => ({ kind: 'custom', serverId: uuid(i) }))), 'mcpServers'],
  // clientTools
  ['tool name with a space', tools(tool({ name: 'look up' })), 'clientTools[0].name'],
  ['tool name with a dot', tools(tool({ name: 'look.up' })), 'clientTools[0].name'],
  ['tool name of 65 chars', tools(tool({ name: str(65) })), 'clientTools[0].name'],
  ['empty tool name', tools(tool({ name: '' })), 'clientTools[0].name'],
  ['duplicate tool names', tools(tool(), tool({ description: 'another' })), 'clientTools[1].name'],
  ['blank tool description', tools(tool({ description: '  ' })), 'clientTools[0].description'],
  ['empty tool description', tools(tool({ description: '' })), 'clientTools[0].description'],
  [
    'blank description of 2nd tool',
    tools(tool(), tool({ name: 'b', description: '\n' })),
    'clientTools[1].description',
  ],
  ...['type', 'name', 'description', 'parameters', 'strict'].map((field): [string, Body, string] => [
    `tool without ${field}`,
    tools(without(tool(), field)),
    `clientTools[0].${field}`,
  ]),
  ['tool with extra field', tools(tool({ extra: true })), 'clientTools[0].extra'],
  ['tool type not function', tools(tool({ type: 'mcp' })), 'clientTools[0].type'],
  ['tool strict not boolean', tools(tool({ strict: 'yes' })), 'clientTools[0].strict'],
  ['parameters a string', tools(tool({ parameters: 'object' })), 'clientTools[0].parameters'],
  ['parameters an array', tools(tool({ parameters: [] })), 'clientTools[0].parameters'],
  [
    'parameters root of type array',
    tools(tool({ parameters: closed({ type: 'array', items: { type: 'string' } }) })),
    'clientTools[0].parameters.type',
  ],
  [
    'parameters without additionalProperties',
    tools(tool({ parameters: { type: 'object', properties: {} } })),
    'clientTools[0].parameters.additionalProperties',
  ],
  [
    'parameters with additionalProperties true',
    tools(tool({ parameters: { type: 'object', additionalProperties: true } })),
    'clientTools[0].parameters.additionalProperties',
  ],
  [
    'strict tool with an optional property',
    tools(
      tool({ parameters: closed({ properties: { q: { type: 'string' }, n: { type: 'integer' } }, required: ['q'] }) }),
    ),
    'clientTools[0].parameters.required',
  ],
  ['parameters with root $ref', tools(tool({ parameters: closed({ $ref: '#/x' }) })), 'clientTools[0].parameters.$ref'],
  [
    'parameters with nested $ref',
    tools(tool({ strict: false, parameters: closed({ properties: { q: { $ref: '#/x' } } }) })),
    'clientTools[0].parameters.properties.q.$ref',
  ],
  ['65 clientTools', tools(...range(65, (i) => tool({ name: `t${i}` }))), 'clientTools'],
  // skills
  ['repo without slash', skills(skill({ repo: 'acme' })), 'skills[0].repo'],
  ['repo with .git suffix', skills(skill({ repo: 'acme/skills.git' })), 'skills[0].repo'],
  ['repo of 301 chars', skills(skill({ repo: `${str(150)}/${str(150)}` })), 'skills[0].repo'],
  ['empty repo', skills(skill({ repo: '' })), 'skills[0].repo'],
  ['path with leading slash', skills(skill({ path: '/tools/pdf' })), 'skills[0].path'],
  ['path with .. segment', skills(skill({ path: 'tools/../pdf' })), 'skills[0].path'],
  ['path with . segment', skills(skill({ path: './tools' })), 'skills[0].path'],
  ['path with backslash', skills(skill({ path: 'tools\\pdf' })), 'skills[0].path'],
  ['path with ?', skills(skill({ path: 'tools/pdf?v=1' })), 'skills[0].path'],
  ['path with #', skills(skill({ path: 'tools/pdf#x' })), 'skills[0].path'],
  ['path with whitespace', skills(skill({ path: 'tools/my pdf' })), 'skills[0].path'],
  ['path with SKILL.md segment', skills(skill({ path: 'tools/pdf/SKILL.md' })), 'skills[0].path'],
  ['path with skill.MD segment', skills(skill({ path: 'skill.MD' })), 'skills[0].path'],
  ['path with an empty segment', skills(skill({ path: 'tools//pdf' })), 'skills[0].path'],
  ['path with a trailing slash', skills(skill({ path: 'tools/pdf/' })), 'skills[0].path'],
  ['path of 1001 chars', skills(skill({ path: str(1001) })), 'skills[0].path'],
  ['empty path', skills(skill({ path: '' })), 'skills[0].path'],
  ['duplicate skills', skills(skill(), skill({ path: 'tools/csv' }), skill()), 'skills[2]'],
  ['129 skills', skills(...range(129, (i) => skill({ path: `p${i}` }))), 'skills'],
  ['skill without path', skills({ repo: 'acme/skills' }), 'skills[0].path'],
  ['skill with extra property', skills(skill({ ref: 'main' })), 'skills[0].ref'],
  // networkPolicy
  ['bad domain_allowlist', net(policy({ domain_allowlist: 'some' })), 'networkPolicy.domain_allowlist'],
  ['missing allow_network_egress', net({ domain_allowlist: 'none' }), 'networkPolicy.allow_network_egress'],
  ['missing domain_allowlist', net({ allow_network_egress: false }), 'networkPolicy.domain_allowlist'],
  ['networkPolicy extra field', net(policy({ proxy: 'x' })), 'networkPolicy.proxy'],
  ['non-boolean allow_public_traffic', net(policy({ allow_public_traffic: 1 })), 'networkPolicy.allow_public_traffic'],
  [
    '129 additional domains',
    net(policy({ additional_allowed_domains: range(129, (i) => `d${i}.example.com`) })),
    'networkPolicy.additional_allowed_domains',
  ],
  [
    'empty additional domain',
    net(policy({ additional_allowed_domains: [''] })),
    'networkPolicy.additional_allowed_domains[0]',
  ],
  [
    'additional domain of 254 chars',
    net(policy({ additional_allowed_domains: ['ok.example.com', str(254)] })),
    'networkPolicy.additional_allowed_domains[1]',
  ],
];

/** [label, fields accepted on POST and PATCH and returned exactly]. */
const valid: [string, Body][] = [
  ['name of 1 char', { name: 'x' }],
  ['name of 100 chars', { name: str(100) }],
  ['description of 500 chars', { description: str(500) }],
  ['instructions of 100000 chars', { instructions: str(100_000) }],
  ['empty instructions', { instructions: '' }],
  ...['scripted', 'scripted/priced', 'openai/gpt-4.1', 'anthropic/claude-x'].map((model): [string, Body] => [
    `model ${model}`,
    { model },
  ]),
  ['maxSteps 1', { maxSteps: 1 }],
  ['maxSteps 128', { maxSteps: 128 }],
  ...INTERNAL_NAMES.map((name): [string, Body] => [`internal ${name}`, mcp({ kind: 'internal', name })]),
  ['composio toolkit', mcp({ kind: 'composio', toolkit: 'gmail' })],
  ['toolkit of 300 chars', mcp({ kind: 'composio', toolkit: str(300) })],
  ['custom without name', mcp({ kind: 'custom', serverId: uuid(7) })],
  ['custom with name', mcp({ kind: 'custom', serverId: uuid(7), name: 'crm' })],
  ['64 mcpServers', mcp(...range(64, (i) => ({ kind: 'custom', serverId: uuid(i) })))],
  [
    'a full client tool',
    tools(
      tool({
        name: 'get-weather_v2',
        parameters: closed({
          properties: {
            city: { type: 'string', description: 'City', minLength: 1 },
            unit: { type: ['string', 'null'], enum: ['c', 'f', null] },
            days: { type: 'array', items: { type: 'integer', minimum: 1 }, maxItems: 7 },
          },
          required: ['city', 'unit', 'days'],
        }),
      }),
    ),
  ],
  ['tool name of 64 chars', tools(tool({ name: str(64) }))],
  [
    'non-strict tool with partial required',
    tools(tool({ strict: false, parameters: closed({ properties: { a: {}, b: {} }, required: ['b'] }) })),
  ],
  ['non-strict tool without required', tools(tool({ strict: false, parameters: closed({ properties: { a: {} } }) }))],
  ['64 clientTools', tools(...range(64, (i) => tool({ name: `t${i}` })))],
  ['a skill', skills(skill())],
  ['repo of 300 chars and path of 1000', skills(skill({ repo: `${str(150)}/${str(149)}`, path: str(1000) }))],
  ['128 skills', skills(...range(128, (i) => skill({ path: `p${i}` })))],
  [
    'full networkPolicy',
    net(
      policy({
        domain_allowlist: 'package_managers_only',
        additional_allowed_domains: [str(253), ...range(127, (i) => `d${i}.example.com`)],
        allow_public_traffic: true,
      }),
    ),
  ],
];

const configFields =
  'name description instructions model maxSteps mcpServers clientTools skills networkPolicy toolApprovals outputFormat contextPolicy compactThreshold'.split(
    ' ',
  );
const configOf = (agent: Json) => Object.fromEntries(configFields.map((field) => [field, agent[field]]));

describe.each(dialects())('agents (%s)', (dialect) => {
  let h: Harness;
  /** An agent that every PATCH validation case targets; none of them may change it. */
  let target: Json;

  const post = (body: unknown, headers: Record<string, string> = {}, key?: string) =>
    h.request('POST', '/v1/agents', { body, headers, ...(key === undefined ? {} : { key }) });
  const patch = (id: unknown, body: unknown) => h.request('PATCH', `/v1/agents/${id}`, { body });
  const get = (id: unknown) => h.request('GET', `/v1/agents/${id}`);
  const list = async (key?: string) => {
    const res = await h.request('GET', '/v1/agents', key === undefined ? {} : { key });
    expect(res.status).toBe(200);
    return json(res).data as Json[];
  };
  const create = async (fields: Body = {}): Promise<Json> => {
    const res = await post({ name: 'Agent', ...fields });
    expect(res.status, res.text).toBe(201);
    return json(res).agent;
  };
  const expectError = (res: HarnessResponse, status: number, code: string, param?: string) => {
    expect(res.status, res.text).toBe(status);
    const { error } = json(res);
    expect(error.code).toBe(code);
    if (param !== undefined) expect(error.param).toBe(param);
    return error;
  };
  const expectInvalid = (res: HarnessResponse, param: string) => {
    const error = expectError(res, 400, 'validation_error', param);
    expect(error.type).toBe('invalid_request_error');
    // The message names the field: its whole path, or its parent's path and its own name.
    const cut = param.lastIndexOf('.');
    const byParent =
      cut > 0 && [param.slice(0, cut), `"${param.slice(cut + 1)}"`].every((s) => error.message.includes(s));
    expect(error.message.includes(param) || byParent, `message "${error.message}" names ${param}`).toBe(true);
  };

  /** The organization's connectors standing in for `uuid(0..63)` of the tables above. */
  const connectors = new Map<string, string>();
  /** The fields with every fixture serverId replaced by the connector created for it. */
  const withConnectors = (fields: Body): Body => {
    let text = JSON.stringify(fields);
    for (const [fixture, id] of connectors) text = text.replaceAll(fixture, id);
    return JSON.parse(text) as Body;
  };

  beforeAll(async () => {
    h = await createHarness(dialect);
    target = await create({ name: 'Target' });
    // Connectors are registered through discovery of a real server (test/mcp-servers.test.ts); here they are
    // only referenced, so they are stored directly, as discovery would store them.
    const store = createMcpServerStore(createSecretBox({ configuredKey: randomBytes(32), keyFile: '/nonexistent' }));
    const org = await h.deps.storage.db
      .selectFrom('orgs')
      .select('id')
      .where('name', '=', 'default')
      .executeTakeFirstOrThrow();
    for (let i = 0; i < 64; i++) {
      const { row } = await store.insert(
        h.deps.storage.db,
        { orgId: org.id, name: `server ${i}`, url: `${MCP_URL}?n=${i}`, headers: {}, discovery: null },
        Date.now(),
      );
      connectors.set(uuid(i), row.id);
    }
  });
  afterAll(() => h.close());

  describe('POST /v1/agents', () => {
    it('creates an agent with the documented defaults', async () => {
      const res = await post({ name: 'Minimal' });
      expect(res.status).toBe(201);
      const { agent } = json(res);
      expect(agent).toEqual({
        id: expect.stringMatching(/^[0-9a-f-]{36}$/),
        object: 'agent',
        name: 'Minimal',
        description: null,
        instructions: '',
        model: 'scripted',
        maxSteps: 32,
        mcpServers: [],
        clientTools: [],
        skills: [],
        networkPolicy: null,
        toolApprovals: { default: 'auto', overrides: {} },
        outputFormat: null,
        contextPolicy: 'truncation',
        compactThreshold: null,
        budget: null,
        isDefault: false,
        version: 1,
        createdAt: expect.stringMatching(/^\d{4}-\d\d-\d\dT.*Z$/),
        updatedAt: agent.createdAt,
      });
      expect(json(await get(agent.id)).agent).toEqual(agent);
    });

    it.each(valid)('accepts %s and returns it exactly', async (_label, given) => {
      const fields = withConnectors(given);
      const agent = await create(fields);
      for (const [field, value] of Object.entries(fields)) expect(agent[field]).toEqual(value);
      expect(json(await get(agent.id)).agent).toEqual(agent);
    });

    it('refuses a custom serverId that names no connector of the organization', async () => {
      expectInvalid(
        await post({ name: 'Ghost', ...mcp({ kind: 'custom', serverId: uuid(999) }) }),
        'mcpServers[0].serverId',
      );
      const other = await h.createOrg(`other-${dialect}`);
      const res = await post(
        { name: 'Foreign', ...mcp({ kind: 'custom', serverId: connectors.get(uuid(1)) }) },
        {},
        other.key,
      );
      expectInvalid(res, 'mcpServers[0].serverId');
    });

    it('refuses a remote url server that cannot be discovered, naming the entry, and writes nothing', async () => {
      const before = (await list()).length;
      const res = await post({ name: 'Remote', ...mcp(url(urlOfLength(2000), 'long')) });
      expectInvalid(res, 'mcpServers[0].url');
      expect(json(res).error.message).toContain('could not be used');
      expect((await list()).length).toBe(before);
    });

    it('fills networkPolicy defaults', async () => {
      const agent = await create(net(policy()));
      expect(agent.networkPolicy).toEqual({
        allow_network_egress: true,
        domain_allowlist: 'none',
        additional_allowed_domains: [],
        allow_public_traffic: false,
      });
    });

    it.each(invalid)('rejects %s', async (_label, fields, param) => {
      expectInvalid(await post({ name: 'Agent', ...fields }), param);
    });

    it('requires name', async () => expectInvalid(await post({ description: 'no name' }), 'name'));
    it.each(['description', 'networkPolicy'])('rejects %s null on create', async (field) =>
      expectInvalid(await post({ name: 'a', [field]: null }), field),
    );

    it.each(['[]', '[{"name":"a"}]', '"agent"', '42'])('rejects the non-object body %s', async (rawBody) => {
      const res = await h.request('POST', '/v1/agents', { rawBody, headers: { 'content-type': 'application/json' } });
      expectInvalid(res, 'body');
    });
    it.each(['null', ''])('treats the body %j as no body, naming the first missing field', async (rawBody) => {
      const res = await h.request('POST', '/v1/agents', { rawBody, headers: { 'content-type': 'application/json' } });
      expectInvalid(res, 'name');
    });
  });

  describe('GET /v1/agents', () => {
    it('lists the default agent and created ones', async () => {
      const data = await list();
      const defaults = data.filter((agent) => agent.isDefault === true);
      expect(defaults).toHaveLength(1);
      expect(defaults[0]).toMatchObject({ object: 'agent', version: 1 });
      expect(data.find((agent) => agent.id === target.id)).toEqual(target);
    });

    it('404s an unknown uuid and 400s a malformed id', async () => {
      const error = expectError(await get(uuid(99)), 404, 'not_found');
      expect(error.type).toBe('not_found_error');
      expectInvalid(await get('not-a-uuid'), 'id');
      expectInvalid(await patch('not-a-uuid', { name: 'x' }), 'id');
      expectInvalid(await h.request('DELETE', '/v1/agents/123'), 'id');
    });
  });

  describe('PATCH /v1/agents/:id', () => {
    it('rejects an empty body', async () => expectInvalid(await patch(target.id, {}), 'body'));
    it('rejects name null', async () => expectInvalid(await patch(target.id, { name: null }), 'name'));

    it.each(invalid)('rejects %s', async (_label, fields, param) => {
      expectInvalid(await patch(target.id, fields), param);
    });

    it('left the target untouched after every rejected change', async () => {
      expect(json(await get(target.id)).agent).toEqual(target);
    });

    it.each(valid)('accepts %s', async (_label, given) => {
      const fields = withConnectors(given);
      const agent = await create();
      const res = await patch(agent.id, fields);
      expect(res.status, res.text).toBe(200);
      expect(json(res).agent).toEqual({ ...agent, ...fields, version: 2, updatedAt: expect.any(String) });
    });

    it('404s an unknown agent', async () => {
      expectError(await patch(uuid(98), { name: 'x' }), 404, 'not_found');
    });

    it('updates each field, bumps the version and keeps every version', async () => {
      const first = await create({ description: 'first', networkPolicy: policy() });
      const changes: Body[] = [
        { name: 'Renamed' },
        { description: 'second' },
        { description: null },
        { instructions: 'Be brief.' },
        { model: 'openai/gpt-4.1' },
        { maxSteps: 7 },
        mcp({ kind: 'internal', name: 'github' }),
        tools(tool()),
        skills(skill()),
        net(policy({ domain_allowlist: 'all_domains', additional_allowed_domains: ['example.com'] })),
        { networkPolicy: null },
        { toolApprovals: { default: 'always_ask', overrides: { 'github__*': 'auto' }, timeoutSeconds: 30 } },
        {
          outputFormat: {
            type: 'json_schema',
            name: 'answer',
            description: 'The answer',
            schema: { type: 'object', properties: { answer: { type: 'string' } }, required: ['answer'] },
            strict: false,
          },
        },
        { outputFormat: { type: 'json_object' } },
        { outputFormat: null },
        { contextPolicy: 'none' },
        { contextPolicy: 'truncation' },
        { contextPolicy: 'compaction', compactThreshold: 50_000 },
        { compactThreshold: null },
        { name: 'Final', maxSteps: 9, skills: [] },
      ];
      const snapshots = [first];
      let previous = first;
      for (const change of changes) {
        await sleep(2);
        const res = await patch(first.id, change);
        expect(res.status, res.text).toBe(200);
        const agent = json(res).agent;
        expect(agent.version).toBe(previous.version + 1);
        expect(agent.updatedAt > previous.updatedAt).toBe(true);
        expect(agent.createdAt).toBe(first.createdAt);
        const expected = { ...configOf(previous), ...change };
        if (change.networkPolicy)
          expected.networkPolicy = {
            additional_allowed_domains: [],
            allow_public_traffic: false,
            ...change.networkPolicy,
          };
        expect(configOf(agent)).toEqual(expected);
        expect(json(await get(first.id)).agent).toEqual(agent);
        snapshots.push(agent);
        previous = agent;
      }
      expect(previous.version).toBe(changes.length + 1);
      const rows = await h.deps.storage.db
        .selectFrom('agent_versions')
        .selectAll()
        .where('agent_id', '=', String(first.id))
        .execute();
      const byVersion = rows.map((row) => ({ version: Number(row.version), config: JSON.parse(row.config) }));
      byVersion.sort((a, b) => a.version - b.version);
      expect(byVersion).toEqual(snapshots.map((agent) => ({ version: agent.version, config: configOf(agent) })));
    });

    describe('after the workspace is provisioned', () => {
      let agent: Json;
      beforeAll(async () => {
        agent = await create({ ...skills(skill()), ...net(policy({ additional_allowed_domains: ['a.example.com'] })) });
        await h.deps.storage.db
          .updateTable('agents')
          .set({ workspace_provisioned_at: Date.now() })
          .where('id', '=', String(agent.id))
          .execute();
      });

      it.each<[string, Body, string]>([
        ['skills changed', skills(skill(), skill({ path: 'tools/csv' })), 'skills'],
        ['skills emptied', skills(), 'skills'],
        ['networkPolicy changed', net(policy({ allow_network_egress: false })), 'networkPolicy'],
        ['networkPolicy removed', net(null), 'networkPolicy'],
        ['networkPolicy with a change among other fields', { name: 'x', ...net(policy()) }, 'networkPolicy'],
      ])('refuses %s with 409 sandbox_provisioned', async (_label, change, param) => {
        const error = expectError(await patch(agent.id, change), 409, 'sandbox_provisioned', param);
        expect(error.type).toBe('conflict_error');
      });

      it.each<[string, Body]>([
        ['the same skills', skills(skill())],
        ['the same networkPolicy', net(policy({ additional_allowed_domains: ['a.example.com'] }))],
        [
          'the same networkPolicy with defaults spelled out',
          net(policy({ additional_allowed_domains: ['a.example.com'], allow_public_traffic: false })),
        ],
        ['other fields', { name: 'Still fine', instructions: 'x', maxSteps: 3 }],
      ])('accepts %s', async (_label, change) => {
        const res = await patch(agent.id, change);
        expect(res.status, res.text).toBe(200);
        expect(json(res).agent).toMatchObject({ skills: agent.skills, networkPolicy: agent.networkPolicy });
      });
    });
  });

  describe('DELETE /v1/agents/:id', () => {
    it('deletes an agent', async () => {
      const agent = await create();
      const res = await h.request('DELETE', `/v1/agents/${agent.id}`);
      expect(res.status).toBe(204);
      expect(res.text).toBe('');
      expectError(await get(agent.id), 404, 'not_found');
      expectError(await h.request('DELETE', `/v1/agents/${agent.id}`), 404, 'not_found');
      expect((await list()).some((item) => item.id === agent.id)).toBe(false);
    });

    it('refuses the default agent', async () => {
      const defaultAgent = (await list()).find((agent) => agent.isDefault === true);
      const error = expectError(await h.request('DELETE', `/v1/agents/${defaultAgent?.id}`), 409, 'default_agent');
      expect(error.type).toBe('conflict_error');
      expect((await get(defaultAgent?.id)).status).toBe(200);
    });

    it('refuses an agent that a session references, until the session is gone', async () => {
      const agent = await create();
      const created = await h.request('POST', '/v1/sessions', { body: { agentId: agent.id } });
      expect(created.status, created.text).toBe(201);
      const session = json(created).session;
      expectError(await h.request('DELETE', `/v1/agents/${agent.id}`), 409, 'agent_in_use');
      expect((await get(agent.id)).status).toBe(200);
      expect((await h.request('DELETE', `/v1/sessions/${session.id}`)).status).toBe(204);
      expect((await h.request('DELETE', `/v1/agents/${agent.id}`)).status).toBe(204);
    });
  });

  describe('Idempotency-Key on POST /v1/agents', () => {
    it('replays the same body and refuses a different one', async () => {
      const headers = { 'idempotency-key': 'create-agent-1' };
      const first = await post({ name: 'Idem' }, headers);
      const second = await post({ name: 'Idem' }, headers);
      expect(first.status).toBe(201);
      expect(second.status).toBe(201);
      expect(first.headers['idempotent-replayed']).toBeUndefined();
      expect(second.headers['idempotent-replayed']).toBe('true');
      expect(second.body).toEqual(first.body);
      const error = expectError(await post({ name: 'Other' }, headers), 409, 'idempotency_conflict');
      expect(error.type).toBe('conflict_error');
      expect((await list()).filter((agent) => agent.name === 'Idem')).toHaveLength(1);
    });

    it('creates exactly one agent from 20 concurrent duplicates', async () => {
      const before = (await list()).length;
      const body = { name: 'Concurrent', ...tools(tool()) };
      const responses = await Promise.all(range(20, () => post(body, { 'idempotency-key': 'burst-1' })));
      for (const res of responses) {
        expect(res.status, res.text).toBe(201);
        expect(res.body).toEqual(responses[0]?.body);
      }
      const after = await list();
      expect(after).toHaveLength(before + 1);
      expect(after.filter((agent) => agent.name === 'Concurrent')).toEqual([
        json(responses[0] as HarnessResponse).agent,
      ]);
    });

    it.each([
      ['256 chars', str(256)],
      ['a space', 'has space'],
      ['a non-ASCII character', 'clé'],
    ])('rejects a key with %s', async (_label, key) => {
      expectInvalid(await post({ name: 'Bad key' }, { 'idempotency-key': key }), 'Idempotency-Key');
    });

    it('accepts a key of 255 chars', async () => {
      expect((await post({ name: 'Long key' }, { 'idempotency-key': str(255, 'k') })).status).toBe(201);
    });

    it('scopes keys to the organization', async () => {
      const other = await h.createOrg('idem-org');
      const headers = { 'idempotency-key': 'shared-key' };
      const mine = json(await post({ name: 'Shared' }, headers)).agent;
      const res = await post({ name: 'Shared' }, headers, other.key);
      expect(res.status).toBe(201);
      expect(res.headers['idempotent-replayed']).toBeUndefined();
      expect(json(res).agent.id).not.toBe(mine.id);
      expect((await list(other.key)).map((agent) => agent.id)).toContain(json(res).agent.id);
    });
  });

  describe('organization isolation', () => {
    it('hides agents of another organization', async () => {
      const other = await h.createOrg('other-org');
      const res = await post({ name: 'Theirs' }, {}, other.key);
      expect(res.status).toBe(201);
      const theirs = json(res).agent;
      expectError(await get(theirs.id), 404, 'not_found');
      expectError(await patch(theirs.id, { name: 'Mine now' }), 404, 'not_found');
      expectError(await h.request('DELETE', `/v1/agents/${theirs.id}`), 404, 'not_found');
      expect((await list()).some((agent) => agent.id === theirs.id)).toBe(false);
      const theirList = await list(other.key);
      expect(theirList.find((agent) => agent.id === theirs.id)).toEqual(theirs);
      expect(theirList.some((agent) => agent.id === target.id)).toBe(false);
      expect(theirList.filter((agent) => agent.isDefault === true)).toHaveLength(1);
    });
  });
});
