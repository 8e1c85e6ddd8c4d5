/**
 * The sandbox tried as an attacker would, against the real bubblewrap runtime: reading the host's secrets, the
 * server's environment and files, other agents' workspaces, and escaping through symlinks and `..` from the shell
 * and through the host-side file functions. Every refusal is paired with a positive check (the thing exists on the
 * host, the tool works inside), so a missing tool or file cannot make a test pass.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { closeSync, existsSync, openSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { resolveLimits } from '../src/config/sandbox-limits.ts';
import { bwrapArgs } from '../src/tools/sandbox/bwrap-args.ts';
import { WorkspacePathError } from '../src/tools/sandbox/sandbox-errors.ts';
import { createSandboxRuntime, type SandboxRuntime } from '../src/tools/sandbox/sandbox-runtime.ts';
import { spawnChild } from './helpers/children.ts';
import { WAIT_MS } from './helpers/deadlines.ts';
import {
  describeSandbox,
  detection,
  errorCode,
  onHost,
  scratchDataDir,
  silentLogger,
  testProjectIds,
} from './helpers/sandbox.ts';

const SECRET = `agentry-secret-${process.pid}-${Date.now()}`;
// The server's environment holds secrets (keys, database URLs); the test process stands in for it.
process.env.AGENTRY_TEST_SANDBOX_SECRET = SECRET;

const repoDir = join(import.meta.dirname, '..');
const data = scratchDataDir('agentry-sandbox-iso-');
let runtime: SandboxRuntime;
let workspaceA: string;
let workspaceB: string;
let hostProcess: ChildProcess;

async function sh(workspace: string, command: string, timeoutMs = 15_000) {
  return runtime.run({ workspace, command, policy: null, timeoutMs });
}

describeSandbox('sandbox isolation', () => {
  beforeAll(async () => {
    runtime = await createSandboxRuntime({
      dataDir: data.path,
      logger: silentLogger,
      allowInsecureDestinations: false,
      projectIdOf: testProjectIds(),
      detection,
    });
    workspaceA = await runtime.workspaceFor('org1', 'agentA');
    workspaceB = await runtime.workspaceFor('org1', 'agentB');
    writeFileSync(join(data.path, 'agentry.db'), 'database-contents');
    // A host process whose environment holds the secret, as the server's own processes would.
    hostProcess = spawnChild('sleep', ['60'], { env: { AGENTRY_TEST_SANDBOX_SECRET: SECRET }, stdio: 'ignore' });
  });
  afterAll(async () => {
    hostProcess.kill('SIGKILL');
    await runtime.close();
    data.remove();
  });

  it('runs as an unprivileged user in /workspace with only the minimal environment', async () => {
    const result = await sh(workspaceA, 'id -u; id -g; pwd; env | cut -d= -f1 | sort | tr "\\n" " "; echo; env');
    expect(result.exitCode).toBe(0);
    const [uid, gid, cwd, names] = result.stdout.split('\n');
    expect({ uid, gid, cwd }).toEqual({ uid: '1000', gid: '1000', cwd: '/workspace' });
    expect(names?.trim().split(' ')).toEqual([
      'HOME',
      'LANG',
      'LOGNAME',
      'PATH',
      'PWD',
      'SHELL',
      'SHLVL',
      'TERM',
      'TMPDIR',
      'USER',
      '_',
    ]);
    expect(result.stdout).not.toContain(SECRET);
    // Positive control: a command started the ordinary way inherits the secret.
    expect(onHost('echo "$AGENTRY_TEST_SANDBOX_SECRET"').stdout.trim()).toBe(SECRET);
    // The workspace on the host belongs to the sandbox user and is closed to others.
    const stats = statSync(workspaceA);
    expect(stats.mode & 0o777).toBe(0o700);
    const user = await runtime.userFor('org1');
    if (user !== null) expect(stats.uid).toBe(user.uid);
  });

  it('cannot see host secrets, the server, its data or other workspaces', async () => {
    const hostPid = hostProcess.pid ?? 0;
    const forbidden = [
      '/etc/shadow',
      '/etc/gshadow',
      '/etc/sudoers',
      '/etc/ssh',
      '/root',
      '/home',
      repoDir,
      join(repoDir, 'package.json'),
      data.path,
      join(data.path, 'agentry.db'),
      workspaceB,
      `/proc/${hostPid}/environ`,
    ];
    // Positive control: on the host, these exist (those that this machine has at all).
    for (const path of [join(repoDir, 'package.json'), join(data.path, 'agentry.db'), workspaceB, `/proc/${hostPid}`]) {
      expect(existsSync(path), path).toBe(true);
    }
    expect(readFileSync(`/proc/${hostPid}/environ`, 'utf8')).toContain(SECRET);
    const script = [
      `for p in ${forbidden.map((path) => `'${path}'`).join(' ')}; do if [ -e "$p" ]; then echo "VISIBLE $p"; fi; done`,
      'cat /etc/shadow 2>&1 | head -1',
      'for f in /proc/[0-9]*/environ; do cat "$f"; done 2>/dev/null | tr "\\0" "\\n"',
      // Positive control inside: the system and the workspace are there.
      'for p in /usr/bin/bash /etc/passwd /workspace; do [ -e "$p" ] && echo "HAS $p"; done',
    ].join('\n');
    const result = await sh(workspaceA, script);
    expect(result.stdout).not.toContain('VISIBLE');
    expect(result.stdout).toContain('/etc/shadow: No such file or directory');
    expect(result.stdout).not.toContain(SECRET);
    expect(result.stdout).toContain('HAS /usr/bin/bash\nHAS /etc/passwd\nHAS /workspace');
    // The system and the workspace are mounted without setuid or devices; the root is read-only.
    const mounts = await sh(
      workspaceA,
      'awk \'$2 == "/usr" || $2 == "/workspace" || $2 == "/" { print $2, $4 }\' /proc/self/mounts',
    );
    expect(mounts.stdout).toMatch(/^\/usr ro,nosuid,nodev/m);
    expect(mounts.stdout).toMatch(/^\/workspace rw,nosuid,nodev/m);
    expect(mounts.stdout).toMatch(/^\/ ro,nosuid,nodev/m);
    expect((await sh(workspaceA, 'touch /usr/x /etc/x /x 2>&1 | grep -c "Read-only file system"')).stdout).toBe('3\n');
    // The only visible processes are the sandbox's own (its PID namespace).
    const pids = await sh(workspaceA, 'ls -d /proc/[0-9]* | wc -l');
    expect(Number(pids.stdout.trim())).toBeLessThan(10);
  });

  it('symlinks and .. from the shell lead only to the sandbox, never to the host', async () => {
    const result = await sh(
      workspaceA,
      [
        'ln -sfn / rootlink && ln -sfn ../../../../../../../../.. up',
        'cat rootlink/etc/shadow up/etc/shadow /workspace/../../etc/shadow 2>&1 | grep -c "No such file"',
        `cat up${repoDir}/package.json 2>&1 | head -1`,
        'grep "^agent:" /workspace/../etc/passwd',
      ].join('\n'),
    );
    expect(result.stdout).toContain('3\n');
    expect(result.stdout).toContain(`up${repoDir}/package.json: No such file or directory`);
    // Positive control: `..` works inside, it just reaches the sandbox's own (synthetic) /etc.
    expect(result.stdout).toContain('agent:x:1000:1000:agent:/workspace:/bin/bash');
  });

  it('the host-side file functions refuse every escape the sandbox plants, FIFOs included', async () => {
    const planted = await sh(
      workspaceA,
      [
        'mkdir -p real && echo inside > real/f.txt',
        'ln -sfn / rootlink; ln -sfn ../../../../../../../../.. up; ln -sfn /etc abs; ln -sfn /workspace/real/f.txt in',
        `ln -sfn ${workspaceB} other; ln -sfn loop loop; mkfifo fifo`,
      ].join('\n'),
    );
    expect(planted.exitCode).toBe(0);
    writeFileSync(join(workspaceB, 'private.txt'), 'agent-b-private');
    expect(await errorCode(runtime.readFile(workspaceA, 'rootlink/etc/passwd'))).toBe('outside_workspace');
    expect(await errorCode(runtime.readFile(workspaceA, 'up/etc/shadow'))).toBe('outside_workspace');
    expect(await errorCode(runtime.readFile(workspaceA, 'abs/passwd'))).toBe('outside_workspace');
    expect(await errorCode(runtime.readFile(workspaceA, 'other/private.txt'))).toBe('outside_workspace');
    expect(await errorCode(runtime.readFile(workspaceA, '../agentB/private.txt'))).toBe('invalid_path');
    expect(await errorCode(runtime.readFile(workspaceA, '/etc/passwd'))).toBe('invalid_path');
    expect(await errorCode(runtime.readFile(workspaceA, 'loop'))).toBe('symlink_loop');
    expect(await errorCode(runtime.readFile(workspaceA, 'fifo'))).toBe('not_a_file');
    expect(await errorCode(runtime.writeFile(workspaceA, 'up/tmp/pwned.txt', 'x'))).toBe('outside_workspace');
    expect(await errorCode(runtime.writeFile(workspaceA, 'other/pwned.txt', 'x'))).toBe('outside_workspace');
    expect(await errorCode(runtime.listFiles(workspaceA, 'rootlink'))).toBe('outside_workspace');
    expect(existsSync('/tmp/pwned.txt')).toBe(false);
    expect(existsSync(join(workspaceB, 'pwned.txt'))).toBe(false);
    // Positive control: a symlink that stays inside (written absolute, as the sandbox sees it) is followed.
    expect((await runtime.readFile(workspaceA, 'in')).content.toString()).toBe('inside\n');
    // Files the host writes belong to the sandbox user, so the sandbox can change them.
    await runtime.writeFile(workspaceA, 'from-host/note.txt', 'host wrote this\n');
    const edited = await sh(workspaceA, 'echo "sandbox appended" >> from-host/note.txt && cat from-host/note.txt');
    expect(edited.stdout).toBe('host wrote this\nsandbox appended\n');
  });

  it('the file functions hold while a running sandbox swaps a directory for an escaping symlink', async () => {
    await runtime.writeFile(workspaceA, 'race/real/secret.txt', 'inside');
    const controller = new AbortController();
    const swapping = runtime.run({
      workspace: workspaceA,
      command: 'cd race && while :; do ln -sfn real d; ln -sfn ../../../../../../../../../etc d; done',
      policy: null,
      signal: controller.signal,
      timeoutMs: 20_000,
    });
    const seen = new Map<string, number>();
    // Read for two seconds, and on until both sides of the swap were seen (on a busy machine the loop inside may
    // take a while to start).
    const enough = Date.now() + 2000;
    const until = Date.now() + WAIT_MS;
    const bothSeen = () => seen.has('inside') && seen.has('outside_workspace');
    while (Date.now() < until && (Date.now() < enough || !bothSeen())) {
      const result = await runtime.readFile(workspaceA, 'race/d/secret.txt').then(
        (file) => file.content.toString(),
        (error: unknown) => (error instanceof WorkspacePathError ? error.code : String(error)),
      );
      seen.set(result, (seen.get(result) ?? 0) + 1);
      const passwd = await runtime.readFile(workspaceA, 'race/d/passwd').then(
        (file) => file.content.toString(),
        (error: unknown) => (error instanceof WorkspacePathError ? error.code : String(error)),
      );
      expect(passwd).not.toContain('root:');
    }
    controller.abort();
    expect((await swapping).killed).toBe('aborted');
    expect([...seen.keys()].every((key) => ['inside', 'outside_workspace', 'not_found'].includes(key))).toBe(true);
    expect(seen.get('inside') ?? 0).toBeGreaterThan(0);
    expect(seen.get('outside_workspace') ?? 0).toBeGreaterThan(0);
  });

  it('two runs of one agent share the workspace; another agent sees none of it', async () => {
    expect((await sh(workspaceA, 'echo from-first-run > shared.txt')).exitCode).toBe(0);
    expect((await sh(workspaceA, 'cat shared.txt')).stdout).toBe('from-first-run\n');
    const other = await sh(
      workspaceB,
      `cat /workspace/shared.txt 2>&1; [ -e '${workspaceA}' ] && echo VISIBLE; ls /workspace`,
    );
    expect(other.stdout).toContain('No such file or directory');
    expect(other.stdout).not.toContain('VISIBLE');
    expect(other.stdout).not.toContain('shared.txt\n');
    expect(other.stdout).toContain('private.txt');
  });

  it('no descriptor of the server reaches the command', async () => {
    if (!detection.available) throw new Error(detection.reason);
    const host = detection;
    const user = await runtime.userFor('org1');
    // A descriptor of a host directory outside the sandbox's root: with it, `..` would walk the host.
    const leaked = openSync(data.path, 'r');
    const list = (command: string[] | null) =>
      new Promise<string>((resolve, reject) => {
        const args = bwrapArgs({
          features: host.features,
          workspace: workspaceA,
          etcFiles: {},
          proxySocket: null,
          socat: null,
          shell: host.shell,
          limits: resolveLimits(),
          command: 'ls /proc/self/fd | tr "\\n" " "',
        });
        const argv = command === null ? args : [...args.slice(0, args.indexOf('--')), '--', ...command];
        const child = spawn(host.path, argv, {
          stdio: ['ignore', 'pipe', 'pipe', leaked],
          env: {},
          ...(user ? { uid: user.uid, gid: user.gid } : {}),
        });
        let out = '';
        child.stdout?.on('data', (chunk: Buffer) => {
          out += chunk.toString();
        });
        child.on('error', reject);
        child.on('close', () => resolve(out.trim()));
      });
    try {
      // Positive control: bubblewrap itself passes the inherited descriptor on (fd 3; 4 is ls's own).
      expect((await list(['/bin/ls', '/proc/self/fd'])).split('\n')).toEqual(expect.arrayContaining(['3', '4']));
      // The wrapper closes it before the command starts.
      expect(await list(null)).toBe('0 1 2 3');
    } finally {
      closeSync(leaked);
    }
  });

  it('a new runtime over the same data directory finds the workspace as it was', async () => {
    const again = await createSandboxRuntime({
      dataDir: data.path,
      logger: silentLogger,
      allowInsecureDestinations: false,
      projectIdOf: testProjectIds(),
      detection,
    });
    const workspace = await again.workspaceFor('org1', 'agentA');
    expect(workspace).toBe(workspaceA);
    expect((await again.run({ workspace, command: 'cat shared.txt', policy: null })).stdout).toBe('from-first-run\n');
    expect((await again.listFiles(workspace)).entries.map((entry) => entry.path)).toContain('shared.txt');
  });

  it('refuses workspaces it did not make and ids that are not plain', async () => {
    expect(await errorCode(runtime.run({ workspace: data.path, command: 'true', policy: null }))).toBe(
      'invalid_workspace',
    );
    expect(await errorCode(runtime.run({ workspace: '/tmp', command: 'true', policy: null }))).toBe(
      'invalid_workspace',
    );
    expect(await errorCode(runtime.readFile(join(workspaceA, '..'), 'agentA/shared.txt'))).toBe('invalid_workspace');
    expect(await errorCode(runtime.workspaceFor('org1', '../agentB'))).toBe('invalid_workspace');
    expect(await errorCode(runtime.workspaceFor('.', 'x'))).toBe('invalid_workspace');
  });

  it.runIf(detection.available && detection.identity.kind !== 'server')(
    'reports itself unavailable when the sandbox user cannot reach the data directory',
    async () => {
      const closed = scratchDataDir('agentry-sandbox-closed-');
      onHost(`chmod 700 '${closed.path}'`);
      try {
        const blocked = await createSandboxRuntime({
          dataDir: closed.path,
          logger: silentLogger,
          allowInsecureDestinations: false,
          projectIdOf: testProjectIds(),
          detection,
        });
        const availability = blocked.available();
        expect(availability.available).toBe(false);
        if (!availability.available) expect(availability.hint).toContain(`chmod o+x ${closed.path}`);
        const workspace = await blocked.workspaceFor('org1', 'agentA');
        expect(await errorCode(blocked.run({ workspace, command: 'true', policy: null }))).toBe('unavailable');
      } finally {
        closed.remove();
      }
    },
  );
});
