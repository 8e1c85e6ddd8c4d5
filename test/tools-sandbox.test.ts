/**
 * The `sandbox` internal tool through the real API, driven by the `scripted` model: a script written in one
 * session and run in the next, files shared by the sessions of one agent and not between agents, refused paths,
 * failing and timed-out commands, an interrupt that kills the running command, a restart that keeps the
 * workspace, and the 409 once the workspace is provisioned. Once per dialect; skipped outside CI when bubblewrap
 * cannot run here, failed under CI=true.
 */
import { spawnSync } from 'node:child_process';
import { existsSync, lstatSync, readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { flows, type Json, waitUntil } from './helpers/fixtures.ts';
import { createHarness, dialects, type Harness, json, testEnvironment, testKey } from './helpers/harness.ts';
import { describeSandbox, hostProcesses } from './helpers/sandbox.ts';

const SANDBOX = { kind: 'internal', name: 'sandbox' };
const call = (tool: string, args: Json) => `call ${tool} ${JSON.stringify(args)}`;
const reply = (message: Json) => message.response?.parts[0]?.text as string;

describeSandbox.each(dialects())('sandbox tools in the loop (%s)', (dialect) => {
  let h: Harness;
  const flow = flows(() => h);

  beforeAll(async () => {
    h = await createHarness(dialect, { AGENTRY_TOOL_TIMEOUT_MS: '2000', AGENTRY_SANDBOX_WORKSPACE_QUOTA_MB: '64' });
  });
  afterAll(async () => {
    await h?.close();
  });

  /** The agent's workspace on the host. */
  async function workspaceOf(harness: Harness, agentId: string): Promise<string> {
    const row = await harness.deps.storage.db
      .selectFrom('agents')
      .select('org_id')
      .where('id', '=', agentId)
      .executeTakeFirstOrThrow();
    return harness.deps.sandbox.workspaceFor(row.org_id, agentId);
  }

  it('writes a script in one session and runs it in another: one workspace per agent, across sessions', async () => {
    const agentId = await flow.createAgent({ mcpServers: [SANDBOX] });
    const script = '#!/bin/bash\necho "hello $1 from $PWD as $(id -u)"\n';
    const first = await flow.turn(agentId, call('sandbox_write_file', { path: 'bin/greet.sh', content: script }));
    expect(first.accepted.warnings).toEqual([]);
    expect(reply(first.message)).toBe(`sandbox_write_file: wrote ${script.length} bytes to bin/greet.sh (created)`);

    const second = await flow.turn(agentId, call('sandbox_run', { command: 'bash bin/greet.sh world' }));
    expect(second.sessionId).not.toBe(first.sessionId);
    expect(second.message.status).toBe('completed');
    expect(reply(second.message)).toMatch(
      /^sandbox_run: exit code: 0\nduration: [\d.]+ s\n--- stdout ---\nhello world from \/workspace as 1000$/,
    );

    const listed = await flow.turn(
      agentId,
      `${call('sandbox_list_files', {})}\n${call('sandbox_read_file', { path: 'bin/greet.sh' })}`,
    );
    // Concurrent calls: their results come back in the order they end.
    expect(reply(listed.message)).toContain(
      `sandbox_list_files: the workspace:\nbin/\nbin/greet.sh (${script.length} bytes)`,
    );
    expect(reply(listed.message)).toContain(`sandbox_read_file: ${script}`);
    // The span of the call says it ran on the agentry server, and succeeded.
    const trace = json(await h.request('GET', `/v1/runs/${second.message.runId}/trace`)).data as Json[];
    expect(trace.find((span) => span.kind === 'tool_call')).toMatchObject({
      name: 'sandbox_run',
      status: 'completed',
      attributes: { server: 'agentry', tool: 'sandbox_run' },
    });
  });

  it('reports failing commands, refused paths and bad arguments to the model as errors', async () => {
    const agentId = await flow.createAgent({ mcpServers: [SANDBOX] });
    const { message } = await flow.turn(
      agentId,
      [
        call('sandbox_run', { command: 'echo oops >&2; exit 3' }),
        call('sandbox_read_file', { path: '../../etc/passwd' }),
        call('sandbox_read_file', { path: '/etc/passwd' }),
        call('sandbox_read_file', { path: 'missing.txt' }),
        call('sandbox_write_file', { path: 'a.txt' }),
        call('sandbox_list_files', { path: 'nowhere' }),
      ].join('\n'),
    );
    // The calls of one step run concurrently: their results come back in the order they end.
    expect(reply(message)).toMatch(/sandbox_run: exit code: 3\nduration: [\d.]+ s\n--- stderr ---\noops/);
    expect(reply(message)).toContain('sandbox_read_file: Error: path must not contain ".." segments');
    expect(reply(message)).toContain('sandbox_read_file: Error: path must be relative to the workspace');
    expect(reply(message)).toContain('sandbox_read_file: Error: no such file: missing.txt');
    expect(reply(message)).toContain('sandbox_write_file: Error: invalid arguments: missing argument content');
    expect(reply(message)).toContain('sandbox_list_files: Error: no such directory: nowhere');
    const spans = (json(await h.request('GET', `/v1/runs/${message.runId}/trace?limit=50`)).data as Json[]).filter(
      (span) => span.kind === 'tool_call',
    );
    expect(spans.map((span) => span.status)).toEqual(Array(6).fill('failed'));
  });

  it('bounds a command by its own timeout (not the generic tool timeout) and kills what it started', async () => {
    const agentId = await flow.createAgent({ mcpServers: [SANDBOX] });
    // Longer than AGENTRY_TOOL_TIMEOUT_MS (2 s): sandbox_run has the sandbox's own wall time.
    const long = await flow.turn(agentId, call('sandbox_run', { command: 'sleep 2.5; echo done' }));
    expect(reply(long.message)).toContain('exit code: 0');
    expect(reply(long.message)).toContain('--- stdout ---\ndone');
    const started = Date.now();
    const { message } = await flow.turn(
      agentId,
      call('sandbox_run', { command: '(sleep 1.5; touch orphan.txt) & sleep 30', timeout_ms: 500 }),
    );
    // Far below the command's 30 s: the 500 ms limit ended it, with room for a loaded machine.
    expect(Date.now() - started).toBeLessThan(20_000);
    expect(reply(message)).toMatch(/^sandbox_run: timed out: the command ran longer than 500 ms and was killed/);
    await new Promise((resolve) => setTimeout(resolve, 2000));
    expect(existsSync(join(await workspaceOf(h, agentId), 'orphan.txt'))).toBe(false);
  });

  it('an interrupt kills the running command and everything it started', async () => {
    const agentId = await flow.createAgent({ mcpServers: [SANDBOX] });
    const workspace = await workspaceOf(h, agentId);
    // The control: the same command, left alone, gets to its end.
    const control = await flow.turn(
      agentId,
      call('sandbox_run', { command: 'touch started.txt; sleep 0.3; touch late.txt' }),
    );
    expect(reply(control.message)).toContain('exit code: 0');
    expect(existsSync(join(workspace, 'late.txt'))).toBe(true);
    const cleanup = await flow.turn(agentId, call('sandbox_run', { command: 'rm started.txt late.txt' }));
    expect(reply(cleanup.message)).toContain('exit code: 0');

    // Sleeps of months, told apart by their arguments (unique to this test, per dialect).
    const sleeps = `sleep 8765${dialect === 'sqlite' ? 1 : 2}`;
    const sessionId = await flow.createSession(agentId);
    const accepted = await flow.submit(
      sessionId,
      call('sandbox_run', {
        command: `(${sleeps}01; touch child.txt) & ${sleeps}02; touch late.txt`,
        // Its own limit, ten minutes: far beyond the waits below, so only the interrupt can end it in time.
        timeout_ms: 600_000,
      }),
    );
    await waitUntil(async () => (hostProcesses(sleeps).length === 2 ? true : null), {
      what: 'the command and its background child to run',
    });
    const interrupted = Date.now();
    const response = await h.request('POST', `/v1/sessions/${sessionId}/interrupt`, { body: {} });
    expect(json(response).status).toBe('interrupting');
    const message = await flow.waitForMessage(sessionId, accepted.id);
    expect(message.status).toBe('cancelled');
    // Docs: within about a second; 10 s leaves room for a loaded machine, the command would run for days.
    expect(Date.now() - interrupted).toBeLessThan(10_000);
    await waitUntil(async () => (hostProcesses(sleeps).length === 0 ? true : null), {
      what: 'the command and its background child to be killed',
    });
    expect(existsSync(join(workspace, 'late.txt'))).toBe(false);
    expect(existsSync(join(workspace, 'child.txt'))).toBe(false);
  });

  it("keeps one agent's files from another, and the server's data directory from both", async () => {
    const owner = await flow.createAgent({ mcpServers: [SANDBOX] });
    const other = await flow.createAgent({ mcpServers: [SANDBOX] });
    const secret = `secret-${Date.now()}`;
    await flow.turn(owner, call('sandbox_write_file', { path: 'secret.txt', content: secret }));
    const ownerWorkspace = await workspaceOf(h, owner);
    // The control: the file exists on the host, and its agent reads it.
    expect(readFileSync(join(ownerWorkspace, 'secret.txt'), 'utf8')).toBe(secret);
    const own = await flow.turn(owner, call('sandbox_run', { command: 'cat secret.txt' }));
    expect(reply(own.message)).toContain(secret);

    const probe = [
      `cat ../${owner}/secret.txt`,
      `cat ${ownerWorkspace}/secret.txt`,
      'ls -a /workspace/..',
      `ls ${h.deps.config.dataDir}`,
      'cat /proc/1/environ | tr "\\0" "\\n"',
    ].join('; ');
    const { message } = await flow.turn(
      other,
      [
        call('sandbox_run', { command: probe }),
        call('sandbox_read_file', { path: `../${owner}/secret.txt` }),
        call('sandbox_list_files', {}),
      ].join('\n'),
    );
    const text = reply(message);
    expect(text).not.toContain(secret);
    expect(text).not.toContain('agentry.db');
    expect(text).not.toContain('AGENTRY_');
    expect(text).toContain(`cat: ../${owner}/secret.txt: No such file or directory`);
    expect(text).toContain(`cat: ${ownerWorkspace}/secret.txt: No such file or directory`);
    expect(text).toContain(`ls: cannot access '${h.deps.config.dataDir}': No such file or directory`);
    // Above the workspace is the sandbox's own root: no other workspace, no host directory.
    expect(text).toMatch(
      /--- stdout ---\n\.\n\.\.\nbin\ndev\netc\n(lib\n)?(lib64\n)?proc\nsbin\ntmp\nusr\n(var\n)?workspace\n/,
    );
    expect(text).toContain('sandbox_read_file: Error: path must not contain ".." segments');
    expect(text).toContain('sandbox_list_files: the workspace is empty');
    if (dialect === 'sqlite') expect(existsSync(join(h.deps.config.dataDir, 'agentry.db'))).toBe(true);
  });

  it.runIf(process.getuid?.() === 0)(
    "the setuid attack: the bit never sticks, and no other host user reaches any organization's files",
    async () => {
      const attacker = await flow.createAgent({ mcpServers: [SANDBOX] });
      const victimOrg = await h.createOrg(`victim-${Date.now()}`);
      const victim = await flow.createAgent({ mcpServers: [SANDBOX] }, victimOrg.key);
      const secret = `victim-secret-${Date.now()}`;
      const sessionId = await flow.createSession(victim, victimOrg.key);
      const accepted = await flow.submit(
        sessionId,
        call('sandbox_write_file', { path: 'secret.txt', content: secret }),
        {
          key: victimOrg.key,
        },
      );
      await flow.waitForMessage(sessionId, accepted.id, undefined, victimOrg.key);
      const victimWorkspace = await workspaceOf(h, victim);
      expect(readFileSync(join(victimWorkspace, 'secret.txt'), 'utf8')).toBe(secret);

      const { message } = await flow.turn(
        attacker,
        call('sandbox_run', {
          command: 'cp /bin/bash ./sbash; chmod 4755 ./sbash; echo "chmod=$?"; chmod 0755 /workspace',
        }),
      );
      expect(reply(message)).toContain('chmod=1');
      expect(reply(message)).toContain("chmod: changing permissions of './sbash': Operation not permitted");
      const attackerWorkspace = await workspaceOf(h, attacker);
      const sbash = join(attackerWorkspace, 'sbash');
      expect(statSync(sbash).mode & 0o6000).toBe(0);

      // Any other user of the host, trying to use what the attacker left.
      const stranger = { uid: 54_321, gid: 54_321, encoding: 'utf8', env: {}, timeout: 10_000 } as const;
      const ran = spawnSync(sbash, ['-p', '-c', `cat ${join(victimWorkspace, 'secret.txt')}`], stranger);
      expect(ran.error?.message ?? '').toContain('EACCES');
      expect(spawnSync('/bin/cat', [join(victimWorkspace, 'secret.txt')], stranger).stdout).not.toContain(secret);
      expect(spawnSync('/bin/ls', [attackerWorkspace], stranger).status).not.toBe(0);
      expect(spawnSync('/bin/ls', ['/'], stranger).status).toBe(0); // the control: that user can run programs

      // The two organizations' sandboxes are different host users: the attacker's cannot read the victim's file.
      const [attackerOwner, victimOwner] = [lstatSync(attackerWorkspace), lstatSync(victimWorkspace)];
      expect(attackerOwner.uid).not.toBe(victimOwner.uid);
      const asOwner = (owner: { uid: number; gid: number }) => ({ ...stranger, uid: owner.uid, gid: owner.gid });
      expect(spawnSync('/bin/cat', [join(victimWorkspace, 'secret.txt')], asOwner(victimOwner)).stdout).toBe(secret);
      expect(spawnSync('/bin/cat', [join(victimWorkspace, 'secret.txt')], asOwner(attackerOwner)).status).not.toBe(0);
    },
  );

  it('stops a command at the workspace quota and says so; writes are refused until files are deleted', async () => {
    const agentId = await flow.createAgent({ mcpServers: [SANDBOX] });
    const filled = await flow.turn(
      agentId,
      call('sandbox_run', { command: 'dd if=/dev/zero of=big bs=1M count=5000' }),
    );
    expect(reply(filled.message)).toMatch(
      /^sandbox_run: killed: the workspace reached its disk quota \(6[45]\.\d MiB in use of 64\.0 MiB\); the command was stopped with every process it started\. Delete files to make room/,
    );
    const write = await flow.turn(agentId, call('sandbox_write_file', { path: 'notes.md', content: 'x'.repeat(4096) }));
    expect(reply(write.message)).toMatch(
      /^sandbox_write_file: Error: the workspace is full: writing 4096 bytes to notes\.md/,
    );
    const cleaned = await flow.turn(agentId, call('sandbox_run', { command: 'rm big' }));
    expect(reply(cleaned.message)).toContain('exit code: 0');
    const again = await flow.turn(agentId, call('sandbox_write_file', { path: 'notes.md', content: 'x'.repeat(4096) }));
    expect(reply(again.message)).toBe('sandbox_write_file: wrote 4096 bytes to notes.md (created)');
  });

  it('fixes skills and networkPolicy once the first turn provisioned the workspace (409)', async () => {
    const agentId = await flow.createAgent({ mcpServers: [SANDBOX] });
    const patch = (body: Json) => h.request('PATCH', `/v1/agents/${agentId}`, { body });
    const policy = { allow_network_egress: true, domain_allowlist: 'package_managers_only' };
    expect((await patch({ networkPolicy: policy })).status).toBe(200);
    expect((await patch({ skills: [{ repo: 'acme/skills', path: 'pdf' }] })).status).toBe(200);
    await flow.turn(agentId, call('sandbox_run', { command: 'true' }));
    for (const body of [{ networkPolicy: null }, { skills: [] }]) {
      const refused = await patch(body);
      expect(refused.status, refused.text).toBe(409);
      expect(json(refused).error.code).toBe('sandbox_provisioned');
    }
    expect((await patch({ instructions: 'still changeable' })).status).toBe(200);
  });
});

describeSandbox.each(dialects())('sandbox workspace across a restart (%s)', (dialect) => {
  it('keeps the workspace when the server restarts over the same data', async () => {
    const shared = testEnvironment(dialect);
    shared.env.AGENTRY_BOOTSTRAP_KEY = testKey();
    try {
      const before = await createHarness(dialect, shared.env);
      let agentId: string;
      try {
        const flow = flows(before);
        agentId = await flow.createAgent({ mcpServers: [SANDBOX] });
        await flow.turn(agentId, call('sandbox_write_file', { path: 'notes/kept.txt', content: 'survives restarts' }));
      } finally {
        await before.close();
      }
      const after = await createHarness(dialect, shared.env);
      try {
        const { message } = await flows(after).turn(agentId, call('sandbox_run', { command: 'cat notes/kept.txt' }));
        expect(reply(message)).toContain('--- stdout ---\nsurvives restarts');
      } finally {
        await after.close();
      }
    } finally {
      await shared.cleanup();
    }
  });
});
