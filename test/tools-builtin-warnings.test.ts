/**
 * What the built-in tools say when they cannot work here: each unsupported internal tool named in a warning, the
 * sandbox tools withheld (never run unisolated) when bubblewrap is missing or the data directory is out of the
 * sandbox user's reach, with the startup log line saying how to fix it, web_search without a provider, network
 * tools under a policy without egress, and inbound traffic that is not supported. Each is paired with the case
 * that works, so that a missing tool cannot pass for a warned one.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pino from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadConfig } from '../src/config.ts';
import { buildDeps } from '../src/deps.ts';
import { flows, type Json } from './helpers/fixtures.ts';
import { createHarness, type Harness, testEnvironment } from './helpers/harness.ts';
import { describeSandbox } from './helpers/sandbox.ts';

const internal = (name: string) => ({ kind: 'internal', name });
const call = (tool: string, args: Json) => `call ${tool} ${JSON.stringify(args)}`;
const reply = (message: Json) => message.response?.parts[0]?.text as string;
const UNSUPPORTED = ['coding_agent', 'company', 'app_builder_contract', 'github', 'sound_studio', 'speech_generator'];

describe('built-in tool warnings', () => {
  let h: Harness;
  const flow = flows(() => h);
  beforeAll(async () => {
    h = await createHarness('sqlite');
  });
  afterAll(async () => {
    await h?.close();
  });

  it('names each internal tool this deployment does not have, and runs the turn without them', async () => {
    const agentId = await flow.createAgent({ mcpServers: [...UNSUPPORTED.map(internal), internal('report_builder')] });
    const { accepted, message } = await flow.turn(
      agentId,
      `${call('coding_agent', {})}\n${call('build_report', { title: 'Works', content: 'yes' })}`,
    );
    expect(accepted.warnings).toEqual(
      UNSUPPORTED.map((name) => ({
        code: 'tool_unavailable',
        message: `internal tool "${name}" is configured on the agent but this deployment cannot run it; the turn runs without it`,
      })),
    );
    expect(message.status).toBe('completed');
    expect(reply(message)).toContain('coding_agent: Error: no tool named "coding_agent" is available');
    expect(reply(message)).toContain('build_report: saved reports/works.md');
  });

  it('says that inbound public traffic is not supported', async () => {
    const policy = { allow_network_egress: false, domain_allowlist: 'none', allow_public_traffic: true };
    const agentId = await flow.createAgent({ networkPolicy: policy });
    const { accepted } = await flow.turn(agentId, 'hello');
    expect(accepted.warnings).toEqual([
      { code: 'public_traffic_unsupported', message: expect.stringContaining('allow_public_traffic is true') },
    ]);
    const quiet = await flow.createAgent({ networkPolicy: { ...policy, allow_public_traffic: false } });
    expect((await flow.turn(quiet, 'hello')).accepted.warnings).toEqual([]);
  });

  it('offers network tools under a policy without egress, warns that they refuse, and they do', async () => {
    const agentId = await flow.createAgent({ mcpServers: [internal('http_client'), internal('web_search_&_browse')] });
    const { accepted, message } = await flow.turn(
      agentId,
      `${call('http_request', { method: 'GET', url: 'https://example.org/' })}\n${call('web_browse', { url: 'https://example.org/' })}\n${call('web_search', { query: 'x' })}`,
    );
    expect(accepted.warnings).toEqual([
      {
        code: 'network_egress_disabled',
        message: expect.stringContaining(
          'internal tool "http_client" is configured on the agent, but its networkPolicy allows no network access',
        ),
      },
      {
        code: 'tool_unavailable',
        message: expect.stringContaining('web_search is not offered because this deployment has no search provider'),
      },
      { code: 'network_egress_disabled', message: expect.stringContaining('internal tool "web_search_&_browse"') },
    ]);
    expect(reply(message)).toContain(
      "http_request: Error: refused: the agent's network policy allows no network access",
    );
    expect(reply(message)).toContain("web_browse: Error: refused: the agent's network policy allows no network access");
    expect(reply(message)).toContain('web_search: Error: no tool named "web_search" is available');
  });
});

describe('without bubblewrap', () => {
  let h: Harness;
  const flow = flows(() => h);
  beforeAll(async () => {
    h = await createHarness('sqlite', { AGENTRY_SANDBOX_BWRAP: '/nonexistent/bwrap' });
  });
  afterAll(async () => {
    await h?.close();
  });

  it('withholds the sandbox tools and says why and how to install bubblewrap; other tools still work', async () => {
    const agentId = await flow.createAgent({ mcpServers: [internal('sandbox'), internal('report_builder')] });
    const { accepted, message } = await flow.turn(
      agentId,
      `${call('sandbox_run', { command: 'id' })}\n${call('build_report', { title: 'No sandbox', content: 'still here' })}`,
    );
    expect(accepted.warnings).toEqual([
      {
        code: 'tool_unavailable',
        message: expect.stringMatching(
          /^internal tool "sandbox" is configured on the agent but this deployment cannot sandbox commands \(bubblewrap \(bwrap\) is not installed\), so sandbox_run, sandbox_read_file, sandbox_write_file, sandbox_list_files are not offered; the operator can fix it: install bubblewrap: apt-get install bubblewrap/,
        ),
      },
    ]);
    expect(reply(message)).toContain('sandbox_run: Error: no tool named "sandbox_run" is available');
    expect(reply(message)).toContain('build_report: saved reports/no-sandbox.md');
  });

  it('logs one startup line saying whether the sandbox is available, and how to install it when not', async () => {
    const lines: Json[] = [];
    const logger = pino({ level: 'info' }, { write: (line: string) => lines.push(JSON.parse(line)) });
    for (const bwrap of ['/nonexistent/bwrap', '']) {
      const environment = testEnvironment('sqlite');
      const deps = await buildDeps(loadConfig({ ...environment.env, AGENTRY_SANDBOX_BWRAP: bwrap }), logger);
      await deps.close();
      await deps.storage.close();
      await environment.cleanup();
    }
    const sandboxLines = lines.filter((line) => String(line.msg).startsWith('sandbox '));
    expect(sandboxLines).toHaveLength(2);
    expect(sandboxLines[0]).toMatchObject({
      level: 40,
      msg: expect.stringMatching(
        /^sandbox unavailable, the sandbox tools are not offered: bubblewrap \(bwrap\) is not installed; to fix: install bubblewrap: apt-get install bubblewrap/,
      ),
    });
    // The second start finds bubblewrap where it is installed (or says why not, on a host without it).
    expect(sandboxLines[1]?.msg).toMatch(/^sandbox (available: bubblewrap \d+\.\d+|unavailable)/);
  });
});

describeSandbox('with a data directory the sandbox user cannot reach', () => {
  const closed = mkdtempSync(join(tmpdir(), 'agentry-closed-'));
  let h: Harness;
  const flow = flows(() => h);
  beforeAll(async () => {
    // mkdtemp makes it 0700, owned by this (root) process: the sandbox user (nobody) cannot search it.
    h = await createHarness('sqlite', { AGENTRY_DATA_DIR: closed });
  });
  afterAll(async () => {
    await h?.close();
    rmSync(closed, { recursive: true, force: true });
  });

  it('withholds the sandbox tools and names the directory to open', async () => {
    const agentId = await flow.createAgent({ mcpServers: [internal('sandbox')] });
    const { accepted, message } = await flow.turn(agentId, call('sandbox_run', { command: 'id' }));
    expect(accepted.warnings).toEqual([
      {
        code: 'tool_unavailable',
        message: expect.stringContaining(`cannot reach ${join(closed, 'workspaces')}: ${closed} is not searchable`),
      },
    ]);
    expect(accepted.warnings[0].message).toContain(`chmod o+x ${closed}`);
    expect(reply(message)).toBe('sandbox_run: Error: no tool named "sandbox_run" is available');
  });
});
