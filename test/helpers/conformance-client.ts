/**
 * The client command of the MCP conformance suite's client scenarios (`conformance client --command …`), with a
 * real Agentry server as the MCP client under test. The suite starts its test server and appends that server's URL
 * to the command; this script then drives Agentry over its public API as a user would:
 *
 * 1. registers the URL as a connector (`oauth: {}` for the `auth/` scenarios, the suite's client when it gives one);
 * 2. for OAuth, starts the sign-in and plays the browser: follows `authorization_url` (the suite's authorization
 *    server approves at once) and hands the redirect to Agentry's `/v1/oauth/callback`;
 * 3. lists the connector's tools and makes a tool call through a turn (a Response of an agent using the connector,
 *    whose `scripted` model calls the tool); a call answered `authorization_required` (more scope needed) signs in
 *    again and calls again, as a person acting on the required action would, a bounded number of times;
 * 4. removes the connector from the agent and deletes it, which closes Agentry's connection to the suite's server.
 *
 * Environment: `AGENTRY_CONFORMANCE_URL` (where Agentry listens), `AGENTRY_CONFORMANCE_KEY` (an admin key),
 * `AGENTRY_CONFORMANCE_PUBLIC_URL` (its `AGENTRY_PUBLIC_URL`: the callback is reached through the listen URL), and
 * the suite's `MCP_CONFORMANCE_SCENARIO` / `MCP_CONFORMANCE_CONTEXT`. Progress goes to stdout; the exit code is
 * non-zero when a step Agentry should have completed failed.
 */

type Json = Record<string, unknown>;

const env = (name: string): string => {
  const value = process.env[name];
  if (value === undefined || value === '') throw new Error(`${name} is not set`);
  return value;
};

const base = env('AGENTRY_CONFORMANCE_URL').replace(/\/$/, '');
const key = env('AGENTRY_CONFORMANCE_KEY');
const publicUrl = env('AGENTRY_CONFORMANCE_PUBLIC_URL').replace(/\/$/, '');
const scenario = process.env.MCP_CONFORMANCE_SCENARIO ?? '';
const context = JSON.parse(process.env.MCP_CONFORMANCE_CONTEXT ?? '{}') as Json;
const serverUrl = process.argv.at(-1) ?? '';

/** Sign-ins a tool call may ask for (a person re-connecting after `authorization_required`). */
const MAX_SIGN_INS = 3;

const log = (line: string) => process.stdout.write(`${line}\n`);

async function api(method: string, path: string, body?: unknown): Promise<Json> {
  const res = await fetch(`${base}${path}`, {
    method,
    headers: { authorization: `Bearer ${key}`, ...(body === undefined ? {} : { 'content-type': 'application/json' }) },
    ...(body === undefined ? {} : { body: JSON.stringify(body) }),
  });
  const text = await res.text();
  if (!res.ok) throw new Error(`${method} ${path} → ${res.status}: ${text}`);
  return JSON.parse(text) as Json;
}

/** The browser: follow the authorization server's redirects until they come back to Agentry's callback. */
async function signIn(serverId: string): Promise<void> {
  const started = await api('POST', `/v1/mcp_servers/${serverId}/connect`, {});
  let url = String(started.authorization_url);
  log(`authorization_url ${url}`);
  for (let hops = 0; hops < 10; hops++) {
    if (url.startsWith(`${publicUrl}/`)) {
      const res = await fetch(`${base}${url.slice(publicUrl.length)}`);
      const text = await res.text();
      if (!res.ok) throw new Error(`callback → ${res.status}: ${text}`);
      log('callback: connected');
      return;
    }
    const res = await fetch(url, { redirect: 'manual' });
    const location = res.headers.get('location');
    if (location === null) throw new Error(`the authorization server answered ${res.status}: ${await res.text()}`);
    url = new URL(location, url).href;
  }
  throw new Error('too many redirects during the sign-in');
}

/** Arguments that satisfy a tool's input schema well enough for a conformance server. */
function argumentsFor(schema: unknown): Json {
  const out: Json = {};
  if (typeof schema !== 'object' || schema === null) return out;
  const properties = (schema as { properties?: Record<string, { type?: unknown }> }).properties ?? {};
  for (const [name, property] of Object.entries(properties)) {
    const type = Array.isArray(property.type) ? property.type[0] : property.type;
    out[name] =
      type === 'number' || type === 'integer'
        ? 1
        : type === 'boolean'
          ? true
          : type === 'object'
            ? {}
            : type === 'array'
              ? []
              : 'test';
  }
  return out;
}

async function main(): Promise<void> {
  log(`scenario ${scenario} server ${serverUrl}`);
  const oauth =
    scenario.startsWith('auth/') || context.client_id !== undefined
      ? {
          ...(typeof context.client_id === 'string' ? { client_id: context.client_id } : {}),
          ...(typeof context.client_secret === 'string' ? { client_secret: context.client_secret } : {}),
        }
      : undefined;
  const name = `conf-${Math.random().toString(36).slice(2, 10)}`;
  const connector = await api('POST', '/v1/mcp_servers', {
    name,
    url: serverUrl,
    ...(oauth === undefined ? {} : { oauth }),
  });
  const id = String(connector.id);
  let signIns = 0;
  if (oauth !== undefined) {
    await signIn(id);
    signIns++;
  }
  const listed = await api('GET', `/v1/mcp_servers/${id}`);
  const tools = (listed.tools ?? []) as { name: string; inputSchema?: unknown; input_schema?: unknown }[];
  log(`tools: ${tools.map((tool) => tool.name).join(', ') || '(none)'}`);
  const tool = tools[0];
  if (tool === undefined) return;

  const agent = await api('POST', '/v1/agents', {
    name,
    model: 'scripted',
    mcpServers: [{ kind: 'custom', serverId: id, name }],
  });
  const agentId = String((agent.agent as Json | undefined)?.id ?? agent.id);
  const args = JSON.stringify(argumentsFor(tool.inputSchema ?? tool.input_schema));
  for (;;) {
    const response = await api('POST', '/v1/responses', { model: agentId, input: `call ${tool.name} ${args}` });
    const output = (response.output ?? []) as Json[];
    const call = output.find((item) => item.type === 'mcp_call');
    const result = JSON.stringify(call?.error ?? call?.output ?? response.output_text ?? '');
    log(`tool call ${tool.name}: ${result.slice(0, 500)}`);
    if (!result.includes('authorization_required')) break;
    if (signIns >= MAX_SIGN_INS) throw new Error('the server still asks for sign-in');
    await signIn(id);
    signIns++;
  }
  // Done with the server: removing the connector closes Agentry's connection to it, so the suite's server can stop.
  await api('PATCH', `/v1/agents/${agentId}`, { mcpServers: [] });
  await api('DELETE', `/v1/mcp_servers/${id}`);
}

main().then(
  () => process.exit(0),
  (error: unknown) => {
    log(`failed: ${error instanceof Error ? error.message : String(error)}`);
    process.exit(1);
  },
);
