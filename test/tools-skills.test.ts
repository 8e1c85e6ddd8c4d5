/**
 * Skills through the real API: from a local skills root and by `git clone` (a bare repository over `file://`, and
 * over `git://` from a local `git daemon` to check that the agent's network policy decides), their name and
 * description in the instructions the model receives (seen by a local OpenAI-compatible stub, the paid edge), their
 * files copied into the workspace under `skills/` (never a symlink, never `.git`), and a missing skill as a
 * warning, never a failed turn. Once per dialect.
 */
import { type ChildProcess, execFileSync } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import { type AddressInfo, createServer as createTcpServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { spawnChild } from './helpers/children.ts';
import { flows, type Json, waitUntil } from './helpers/fixtures.ts';
import { createHarness, dialects, type Harness } from './helpers/harness.ts';

const root = mkdtempSync(join(tmpdir(), 'agentry-skills-'));
const localRoot = join(root, 'local');
const gitRoot = join(root, 'git');
const PDF_SKILL = `---
name: pdf-tools
description: >
  Extract text and tables
  from PDF files.
---
# PDF tools

Run \`python3 extract.py <file>\`.
`;

function git(args: string[], cwd: string) {
  execFileSync('git', args, {
    cwd,
    stdio: 'pipe',
    env: {
      PATH: '/usr/local/bin:/usr/bin:/bin',
      HOME: root,
      GIT_CONFIG_NOSYSTEM: '1',
      GIT_AUTHOR_NAME: 't',
      GIT_AUTHOR_EMAIL: 't@example.test',
      GIT_COMMITTER_NAME: 't',
      GIT_COMMITTER_EMAIL: 't@example.test',
    },
  });
}

/** acme/skills in the local root: a skill with a nested file, a script and a symlink to a host file. */
function makeLocalRoot() {
  const dir = join(localRoot, 'acme', 'skills', 'tools', 'pdf');
  mkdirSync(join(dir, 'lib'), { recursive: true });
  writeFileSync(join(dir, 'SKILL.md'), PDF_SKILL);
  writeFileSync(join(dir, 'extract.py'), 'print("extracting")\n');
  writeFileSync(join(dir, 'lib', 'helpers.py'), 'HELP = 1\n');
  symlinkSync('/etc/passwd', join(dir, 'passwd'));
}

/** acme/remote-skills as a bare repository, with `writing/SKILL.md` (no front matter) and a symlink. */
function makeGitRepository() {
  const work = join(root, 'work');
  mkdirSync(join(work, 'writing'), { recursive: true });
  writeFileSync(join(work, 'writing', 'SKILL.md'), '# Writing\n\nShort sentences.\n');
  writeFileSync(join(work, 'writing', 'style.md'), 'Active voice.\n');
  symlinkSync('/etc/hostname', join(work, 'writing', 'host'));
  git(['init', '-q', '-b', 'main'], work);
  git(['add', '-A'], work);
  git(['commit', '-q', '-m', 'skills'], work);
  mkdirSync(join(gitRoot, 'acme'), { recursive: true });
  git(['clone', '-q', '--bare', work, join(gitRoot, 'acme', 'remote-skills.git')], root);
}

async function freePort(): Promise<number> {
  const probe = createTcpServer();
  await new Promise<void>((resolve) => probe.listen(0, '127.0.0.1', resolve));
  const { port } = probe.address() as AddressInfo;
  await new Promise((resolve) => probe.close(resolve));
  return port;
}

/** The OpenAI-compatible stub: records each request body and answers "ok". */
const requests: Json[] = [];
let stub: Server;
let daemon: ChildProcess;
let daemonPort = 0;

beforeAll(async () => {
  makeLocalRoot();
  makeGitRepository();
  stub = createServer((request, response) => {
    let text = '';
    request.on('data', (chunk: Buffer) => {
      text += chunk.toString();
    });
    request.on('end', () => {
      requests.push(JSON.parse(text));
      const chunk = (delta: Json, finish: string | null = null) =>
        `data: ${JSON.stringify({ id: 'c', object: 'chat.completion.chunk', created: 1, model: 'm', choices: [{ index: 0, delta, finish_reason: finish }] })}\n\n`;
      response.writeHead(200, { 'content-type': 'text/event-stream' });
      response.end(`${chunk({ role: 'assistant', content: 'ok' })}${chunk({}, 'stop')}data: [DONE]\n\n`);
    });
  });
  await new Promise<void>((resolve) => stub.listen(0, '127.0.0.1', resolve));
  daemonPort = await freePort();
  daemon = spawnChild(
    'git',
    [
      'daemon',
      '--reuseaddr',
      '--export-all',
      `--base-path=${gitRoot}`,
      '--listen=127.0.0.1',
      `--port=${daemonPort}`,
      gitRoot,
    ],
    { stdio: 'ignore' },
  );
  await waitUntil(
    async () =>
      new Promise<boolean | null>((resolve) => {
        const socket = createTcpServer();
        socket.once('error', () => resolve(true)); // the port is taken: the daemon listens
        socket.listen(daemonPort, '127.0.0.1', () => socket.close(() => resolve(null)));
      }),
    { what: 'git daemon to listen' },
  );
});
afterAll(async () => {
  daemon?.kill('SIGKILL');
  stub?.closeAllConnections();
  await new Promise((resolve) => stub?.close(resolve));
  rmSync(root, { recursive: true, force: true });
});

const SKILLS = { kind: 'internal', name: 'skills' };

/** The warning events of a turn (skills that could not be loaded). */
async function turnWarnings(h: Harness, messageId: string): Promise<Json[]> {
  const events = await h.deps.storage.db
    .selectFrom('session_events')
    .select('data')
    .where('message_id', '=', messageId)
    .execute();
  return events.map((event) => JSON.parse(event.data)).filter((data) => data.type === 'warning');
}
const systemText = (body: Json | undefined): string =>
  JSON.stringify((body?.messages as Json[] | undefined)?.filter((message) => message.role === 'system') ?? []);

describe.each(dialects())('skills (%s)', (dialect) => {
  let h: Harness;
  const flow = flows(() => h);

  beforeAll(async () => {
    h = await createHarness(dialect, {
      AGENTRY_PROVIDERS: JSON.stringify({
        stub: { baseURL: `http://127.0.0.1:${(stub.address() as AddressInfo).port}/v1` },
      }),
      AGENTRY_SKILLS_DIR: localRoot,
      AGENTRY_SKILLS_GIT_URL: `file://${gitRoot}/{repo}.git`,
    });
  });
  afterAll(async () => {
    await h?.close();
  });

  async function workspaceOf(agentId: string): Promise<string> {
    const row = await h.deps.storage.db
      .selectFrom('agents')
      .select('org_id')
      .where('id', '=', agentId)
      .executeTakeFirstOrThrow();
    return h.deps.sandbox.workspaceFor(row.org_id, agentId);
  }

  it('puts each skill in the instructions and its files in the workspace, from the local root and from git', async () => {
    const agentId = await flow.createAgent({
      model: 'stub/test-model',
      instructions: 'Be brief.',
      mcpServers: [SKILLS],
      skills: [
        { repo: 'acme/skills', path: 'tools/pdf' },
        { repo: 'acme/remote-skills', path: 'writing' },
      ],
    });
    const before = requests.length;
    const { accepted, message } = await flow.turn(agentId, 'hello');
    expect(accepted.warnings).toEqual([]);
    expect(message.status).toBe('completed');
    const system = systemText(requests[before]);
    expect(system).toContain('Be brief.');
    expect(system).toContain(
      'Skill \\"pdf-tools\\": Extract text and tables from PDF files. (its instructions are in skills/acme/skills/tools/pdf/SKILL.md in your workspace',
    );
    expect(system).toContain('Skill \\"writing\\" (its instructions are in skills/acme/remote-skills/writing/SKILL.md');

    const workspace = await workspaceOf(agentId);
    const pdf = join(workspace, 'skills', 'acme', 'skills', 'tools', 'pdf');
    expect(readFileSync(join(pdf, 'SKILL.md'), 'utf8')).toBe(PDF_SKILL);
    expect(readFileSync(join(pdf, 'lib', 'helpers.py'), 'utf8')).toBe('HELP = 1\n');
    expect(existsSync(join(pdf, 'extract.py'))).toBe(true);
    expect(existsSync(join(pdf, 'passwd'))).toBe(false);
    const writing = join(workspace, 'skills', 'acme', 'remote-skills', 'writing');
    expect(readFileSync(join(writing, 'style.md'), 'utf8')).toBe('Active voice.\n');
    expect(existsSync(join(writing, 'host'))).toBe(false);
    expect(existsSync(join(workspace, 'skills', 'acme', 'remote-skills', '.git'))).toBe(false);

    // A file the agent changed in its workspace is its own: the next turn does not copy over it.
    writeFileSync(join(pdf, 'extract.py'), 'print("changed")\n');
    await flow.turn(agentId, 'again');
    expect(readFileSync(join(pdf, 'extract.py'), 'utf8')).toBe('print("changed")\n');
  });

  it('warns about a skill that cannot be found, and one that fails to load, and runs the turn anyway', async () => {
    const agentId = await flow.createAgent({
      skills: [
        { repo: 'acme/skills', path: 'tools/pdf' },
        { repo: 'acme/remote-skills', path: 'missing' },
        { repo: 'nobody/nothing', path: 'x' },
      ],
    });
    const { accepted, message } = await flow.turn(agentId, 'hello');
    // Cloning is configured (file://), so no accept-time verdict is possible without calling out...
    expect(accepted.warnings).toEqual([]);
    expect(message.status).toBe('completed');
    // ...and the turn reports what could not be loaded.
    const warnings = await turnWarnings(h, message.id);
    expect(warnings).toEqual(
      expect.arrayContaining([
        expect.objectContaining({
          code: 'tool_source_failed',
          message: expect.stringContaining('skill acme/remote-skills/missing could not be loaded'),
        }),
        expect.objectContaining({
          code: 'tool_source_failed',
          message: expect.stringContaining(
            'skill nobody/nothing/x could not be loaded; it is left out of this turn: git clone of nobody/nothing failed',
          ),
        }),
      ]),
    );
    expect(warnings).toHaveLength(2);
  });
});

describe('skills without a way to get them', () => {
  it('warns at accept time when neither the local root nor cloning can provide a skill', async () => {
    const h = await createHarness('sqlite', { AGENTRY_SKILLS_DIR: localRoot });
    const bare = await createHarness('sqlite');
    try {
      const agentId = await flows(h).createAgent({
        skills: [
          { repo: 'acme/skills', path: 'tools/pdf' },
          { repo: 'acme/skills', path: 'tools/missing' },
        ],
      });
      const { accepted, message } = await flows(h).turn(agentId, 'hello');
      expect(accepted.warnings).toEqual([
        {
          code: 'skill_unavailable',
          message:
            'skill acme/skills/tools/missing was not found in the skills directory (no acme/skills/tools/missing/SKILL.md) and cloning is not configured; the turn runs without it',
        },
      ]);
      expect(message.status).toBe('completed');
      const other = await flows(bare).createAgent({ skills: [{ repo: 'acme/skills', path: 'tools/pdf' }] });
      expect((await flows(bare).turn(other, 'hello')).accepted.warnings).toEqual([
        {
          code: 'skill_unavailable',
          message: expect.stringContaining(
            'this deployment has no skills source (AGENTRY_SKILLS_DIR, AGENTRY_SKILLS_GIT_URL)',
          ),
        },
      ]);
    } finally {
      await h.close();
      await bare.close();
    }
  });

  it('parses front matter within the CPU pool limits: a hostile one leaves its skill out of the turn', async () => {
    // 64 KiB of distinct keys: yaml's duplicate-key check is quadratic, most of a second of CPU here. It runs in the
    // CPU pool, whose time limit (100 ms for this test) ends it; on the event loop it would hold every request.
    const keys = Array.from({ length: 12_000 }, (_, i) => `k${i.toString(36)}: v`).join('\n');
    const dir = join(localRoot, 'acme', 'skills', 'hostile');
    mkdirSync(dir, { recursive: true });
    writeFileSync(join(dir, 'SKILL.md'), `---\n${keys.slice(0, 60 * 1024)}\n---\n# Hostile\n`);
    const h = await createHarness('sqlite', { AGENTRY_SKILLS_DIR: localRoot, AGENTRY_CPU_TIMEOUT_MS: '100' });
    try {
      const agentId = await flows(h).createAgent({ skills: [{ repo: 'acme/skills', path: 'hostile' }] });
      const { message } = await flows(h).turn(agentId, 'hello');
      expect(message.status).toBe('completed');
      expect(await turnWarnings(h, message.id)).toEqual([
        expect.objectContaining({
          code: 'tool_source_failed',
          message: expect.stringContaining(
            'the front matter of acme/skills/hostile/SKILL.md could not be read: it took longer than 0.1 s',
          ),
        }),
      ]);
    } finally {
      await h.close();
    }
  });

  it('clones over the network only when the policy allows the git host', async () => {
    const h = await createHarness('sqlite', { AGENTRY_SKILLS_GIT_URL: `git://127.0.0.1:${daemonPort}/{repo}.git` });
    try {
      const flow = flows(h);
      const skills = [{ repo: 'acme/remote-skills', path: 'writing' }];
      const refused = await flow.createAgent({
        skills,
        networkPolicy: { allow_network_egress: true, domain_allowlist: 'package_managers_only' },
      });
      expect((await flow.turn(refused, 'hello')).accepted.warnings).toEqual([
        {
          code: 'skill_unavailable',
          message:
            "skill acme/remote-skills/writing is not in the local skills directory, and the agent's network policy does not allow 127.0.0.1 to clone it from; the turn runs without it",
        },
      ]);
      const allowed = await flow.createAgent({
        skills,
        networkPolicy: {
          allow_network_egress: true,
          domain_allowlist: 'none',
          additional_allowed_domains: ['127.0.0.1'],
        },
      });
      const { accepted, message } = await flow.turn(allowed, 'hello');
      expect(accepted.warnings).toEqual([]);
      expect(message.status).toBe('completed');
      const row = await h.deps.storage.db
        .selectFrom('agents')
        .select('org_id')
        .where('id', '=', allowed)
        .executeTakeFirstOrThrow();
      const workspace = await h.deps.sandbox.workspaceFor(row.org_id, allowed);
      expect(readFileSync(join(workspace, 'skills', 'acme', 'remote-skills', 'writing', 'SKILL.md'), 'utf8')).toBe(
        '# Writing\n\nShort sentences.\n',
      );
    } finally {
      await h.close();
    }
  });
});
