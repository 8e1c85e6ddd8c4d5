/**
 * The workspace turned against the host, and the disk filled: against the real bubblewrap runtime. A command
 * tries to leave a setuid program behind and to open its workspace to every host user; a real unprivileged host
 * process then tries to use both; two organizations' sandboxes must run as different host users that cannot read
 * each other's files; a data directory from an older version must be closed at startup and re-owned on first use;
 * and commands that write gigabytes must stop at the workspace's quota while they run. Host-side checks run as
 * other uids, so these tests need root (as the sandbox suites do).
 */
import { spawnSync } from 'node:child_process';
import {
  chmodSync,
  chownSync,
  copyFileSync,
  existsSync,
  lstatSync,
  mkdirSync,
  readdirSync,
  statSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, expect, it } from 'vitest';
import type { SandboxLimits } from '../src/config/sandbox-limits.ts';
import { createSandboxRuntime, type SandboxRuntime } from '../src/tools/sandbox/sandbox-runtime.ts';
import {
  describeSandbox,
  detection,
  errorCode,
  scratchDataDir,
  silentLogger,
  testProjectIds,
} from './helpers/sandbox.ts';

const MIB = 1024 * 1024;
/** A host uid no account and no sandbox has: "any other user on the machine". */
const STRANGER = 54_321;
const asRoot = process.getuid?.() === 0;
/** A 16 MiB quota, and a file-size limit that would let one file far past it. */
const SMALL_QUOTA = { quotaBytes: 16 * MIB, limits: { fileSizeBytes: 256 * MIB } };

const directories: { remove: () => void }[] = [];
const runtimes: SandboxRuntime[] = [];

async function runtimeOver(
  options: {
    quotaBytes?: number;
    limits?: Partial<SandboxLimits>;
    walkBounds?: { maxEntries: number; maxDepth: number; timeoutMs: number };
  } = {},
  dataDir?: string,
): Promise<{ runtime: SandboxRuntime; dataDir: string }> {
  let path = dataDir;
  if (path === undefined) {
    const scratch = scratchDataDir('agentry-sandbox-hard-');
    directories.push(scratch);
    path = scratch.path;
  }
  const runtime = await createSandboxRuntime({
    dataDir: path,
    logger: silentLogger,
    allowInsecureDestinations: false,
    projectIdOf: testProjectIds(),
    detection,
    ...options,
  });
  runtimes.push(runtime);
  return { runtime, dataDir: path };
}

/** A workspace of a runtime of its own (a small quota, small walk bounds), and a way to run commands in it. */
async function workspaceWith(options: Parameters<typeof runtimeOver>[0], agentId: string) {
  const { runtime } = await runtimeOver(options);
  const workspace = await runtime.workspaceFor('orgQ', agentId);
  const sh = (command: string, timeoutMs = 60_000) => runtime.run({ workspace, policy: null, command, timeoutMs });
  return { runtime, workspace, sh };
}

/** Runs a program on the host as `uid`, outside any sandbox. */
function as(uid: number, command: string, args: string[]) {
  const result = spawnSync(command, args, { uid, gid: uid, encoding: 'utf8', timeout: 10_000, env: {} });
  return { status: result.status, stdout: result.stdout ?? '', stderr: result.stderr ?? '', error: result.error };
}

describeSandbox('sandbox hardening', () => {
  let runtime: SandboxRuntime;
  let dataDir: string;
  let workspaceA: string;
  let workspaceB: string;

  beforeAll(async () => {
    ({ runtime, dataDir } = await runtimeOver());
    workspaceA = await runtime.workspaceFor('orgA', 'agent1');
    workspaceB = await runtime.workspaceFor('orgB', 'agent1');
    await runtime.writeFile(workspaceB, 'secret.txt', 'org B private\n');
  });
  afterAll(async () => {
    for (const each of runtimes) await each.close();
    for (const directory of directories) directory.remove();
  });

  it('a command cannot make a setuid or setgid file, by any of the usual calls', async () => {
    const result = await runtime.run({
      workspace: workspaceA,
      policy: null,
      command: [
        'grep "^Seccomp:" /proc/self/status',
        'cp /bin/bash sbash; chmod 4755 sbash; echo "chmod=$?"; chmod g+s sbash; echo "chmod-g=$?"',
        'install -m 4755 /bin/true itrue; echo "install=$?"',
        `python3 - <<'EOF'
import os
def attempt(name, action):
    try:
        action(); print(name, "allowed")
    except OSError as error:
        print(name, "refused", error.errno)
attempt("open", lambda: os.close(os.open("created", os.O_CREAT | os.O_WRONLY, 0o4755)))
attempt("mknod", lambda: os.mknod("made", 0o100000 | 0o2755))
attempt("fchmod", lambda: os.fchmod(os.open("sbash", os.O_RDONLY), 0o6755))
attempt("plain", lambda: os.chmod("sbash", 0o700))
EOF`,
        'touch big; fallocate -n -l 100M big; echo "keep-size=$?"; fallocate -l 64K small; echo "fallocate=$?"',
        'stat -c "%a %n" sbash itrue created made 2>&1',
      ].join('\n'),
    });
    expect(result.stdout).toMatch(/^Seccomp:\s+2$/m);
    expect(result.stdout).toContain('chmod=1\nchmod-g=1\n');
    expect(result.stderr).toContain("chmod: changing permissions of 'sbash': Operation not permitted");
    expect(result.stdout).toContain('install=1');
    expect(result.stdout).toContain('open refused 1\nmknod refused 1\nfchmod refused 1\nplain allowed\n');
    // Preallocating past the end of a file would dodge the file-size limit (and so the quota): refused too.
    expect(result.stdout).toContain('keep-size=1\nfallocate=0');
    expect(result.stdout).toMatch(/^700 sbash$/m);
    for (const name of readdirSync(workspaceA)) {
      expect(lstatSync(join(workspaceA, name)).mode & 0o6000, name).toBe(0);
    }
    expect(statSync(join(workspaceA, 'big')).blocks).toBe(0);
  });

  it('clears setuid/setgid bits that got into the workspace another way, after every command', async () => {
    // As if an archive had been unpacked by something outside the filter: planted by the host.
    const outside = join(dataDir, 'outside-suid');
    copyFileSync('/bin/true', outside);
    chmodSync(outside, 0o4755);
    mkdirSync(join(workspaceA, 'carried/deep'), { recursive: true });
    copyFileSync('/bin/true', join(workspaceA, 'carried/deep/suid'));
    chmodSync(join(workspaceA, 'carried/deep/suid'), 0o4755);
    copyFileSync('/bin/true', join(workspaceA, 'carried/sgid'));
    chmodSync(join(workspaceA, 'carried/sgid'), 0o2755);
    symlinkSync(outside, join(workspaceA, 'carried/link'));
    expect(statSync(join(workspaceA, 'carried/deep/suid')).mode & 0o7777).toBe(0o4755);

    const result = await runtime.run({ workspace: workspaceA, policy: null, command: 'true' });
    expect(result.exitCode).toBe(0);
    expect(statSync(join(workspaceA, 'carried/deep/suid')).mode & 0o7777).toBe(0o755);
    expect(statSync(join(workspaceA, 'carried/sgid')).mode & 0o7777).toBe(0o755);
    // The walk never follows a symlink out of the workspace.
    expect(statSync(outside).mode & 0o7777).toBe(0o4755);
  });

  it.runIf(asRoot)('the attack: another host user can neither enter the workspace nor run what it left', async () => {
    const attack = await runtime.run({
      workspace: workspaceA,
      policy: null,
      command: 'cp /bin/bash ./sbash2; chmod 4755 ./sbash2; chmod 0755 /workspace; echo done',
    });
    expect(attack.stdout).toBe('done\n');
    expect(statSync(workspaceA).mode & 0o777).toBe(0o755); // the sandbox did open its own folder
    const sbash = join(workspaceA, 'sbash2');
    expect(existsSync(sbash)).toBe(true);
    expect(statSync(sbash).mode & 0o6000).toBe(0);

    // A real unprivileged process of the host, as any local user would be.
    const run = as(STRANGER, sbash, ['-p', '-c', `id -u; cat ${join(workspaceB, 'secret.txt')}`]);
    expect(run.error?.message ?? '').toMatch(/EACCES/);
    expect(run.stdout).not.toContain('org B private');
    expect(as(STRANGER, '/bin/ls', [workspaceA]).status).not.toBe(0);
    expect(as(STRANGER, '/bin/cat', [join(workspaceB, 'secret.txt')]).status).not.toBe(0);
    expect(as(STRANGER, '/usr/bin/touch', [join(workspaceA, 'planted')]).status).not.toBe(0);
    // Positive control: the same programs work for that user where it may go.
    expect(as(STRANGER, '/bin/ls', ['/']).status).toBe(0);
    expect(as(STRANGER, '/bin/bash', ['-c', 'id -u']).stdout).toBe(`${STRANGER}\n`);

    // What keeps it out: the folders above the workspace, which the sandbox never sees.
    const root = join(dataDir, 'workspaces');
    expect(lstatSync(root)).toMatchObject({ uid: 0, gid: 0 });
    expect(lstatSync(root).mode & 0o7777).toBe(0o711);
    const user = await runtime.userFor('orgA');
    expect(lstatSync(join(root, 'orgA'))).toMatchObject({ uid: 0, gid: user?.gid });
    expect(lstatSync(join(root, 'orgA')).mode & 0o7777).toBe(0o710);
  });

  it.runIf(asRoot)("two organizations' sandboxes are two host users; neither can read the other's files", async () => {
    expect(lstatSync(workspaceA).uid).not.toBe(lstatSync(workspaceB).uid);
    const [userA, userB] = [await runtime.userFor('orgA'), await runtime.userFor('orgB')];
    if (userA === null || userB === null) throw new Error('root gives each organization a user');
    expect(userA.uid).not.toBe(userB.uid);
    for (const user of [userA, userB]) {
      expect(user.uid).toBeGreaterThan(65_535);
      expect(user.uid).toBeLessThan(2 ** 31);
    }
    expect(lstatSync(workspaceA)).toMatchObject({ uid: userA.uid, gid: userA.gid });
    expect(lstatSync(workspaceB)).toMatchObject({ uid: userB.uid, gid: userB.gid });
    // Inside, each sees itself as uid 1000 on files it owns; on the host the numbers differ.
    const made = await runtime.run({ workspace: workspaceA, policy: null, command: 'echo a > mine.txt; id -u' });
    expect(made.stdout).toBe('1000\n');
    expect(lstatSync(join(workspaceA, 'mine.txt')).uid).toBe(userA.uid);

    const secret = join(workspaceB, 'secret.txt');
    expect(lstatSync(secret).uid).toBe(userB.uid);
    // Positive control: org B's identity reads its own file; org A's cannot, even with the workspace opened up.
    expect(as(userB.uid, '/bin/cat', [secret]).stdout).toBe('org B private\n');
    chmodSync(workspaceB, 0o755);
    chmodSync(secret, 0o644);
    const stolen = as(userA.uid, '/bin/cat', [secret]);
    expect(stolen.status).not.toBe(0);
    expect(stolen.stderr).toContain('Permission denied');
    expect(as(userA.uid, '/bin/cat', [join(workspaceA, 'mine.txt')]).stdout).toBe('a\n');
  });

  it.runIf(asRoot)(
    'closes an older data directory at startup and gives its workspaces to their organization',
    async () => {
      // The layout an older version left: every folder open to traversal, every workspace owned by nobody.
      const { dataDir: old } = await runtimeOver();
      const root = join(old, 'workspaces');
      const workspace = join(root, 'orgOld', 'agentOld');
      mkdirSync(join(workspace, 'src/lib'), { recursive: true });
      writeFileSync(join(workspace, 'src/lib/code.py'), 'print(1)\n');
      chmodSync(root, 0o755);
      chmodSync(join(root, 'orgOld'), 0o711);
      chmodSync(workspace, 0o755);
      for (const path of [
        workspace,
        join(workspace, 'src'),
        join(workspace, 'src/lib'),
        join(workspace, 'src/lib/code.py'),
      ]) {
        chownSync(path, 65_534, 65_534);
      }
      // Positive control: as it is, any host user reads the file.
      expect(as(STRANGER, '/bin/cat', [join(workspace, 'src/lib/code.py')]).stdout).toBe('print(1)\n');

      const { runtime: upgraded } = await runtimeOver({}, old);
      expect(statSync(root).mode & 0o7777).toBe(0o711);
      expect(statSync(join(root, 'orgOld')).mode & 0o7007).toBe(0);
      expect(as(STRANGER, '/bin/cat', [join(workspace, 'src/lib/code.py')]).status).not.toBe(0);

      expect(await upgraded.workspaceFor('orgOld', 'agentOld')).toBe(workspace);
      const user = await upgraded.userFor('orgOld');
      for (const path of ['', 'src', 'src/lib', 'src/lib/code.py']) {
        expect(lstatSync(join(workspace, path)), path).toMatchObject({ uid: user?.uid, gid: user?.gid });
      }
      const result = await upgraded.run({
        workspace,
        policy: null,
        command: 'echo more >> src/lib/code.py && cat src/lib/code.py',
      });
      expect(result.stdout).toBe('print(1)\nmore\n');
    },
  );

  it('stops `dd` of 5 GB at the quota, and refuses writes until files are deleted', async () => {
    const { runtime, workspace, sh } = await workspaceWith(SMALL_QUOTA, 'agent1');
    const dd = await sh('dd if=/dev/zero of=big bs=1M count=5000');
    expect(dd.killed).toBe('disk_quota');
    expect(statSync(join(workspace, 'big')).size).toBeLessThanOrEqual(16 * MIB);
    expect(dd.disk).toMatchObject({ quotaBytes: 16 * MIB });

    // Full: the server's own writes (the write tool, reports, skills) are refused; a command that deletes runs.
    const note = () => runtime.writeFile(workspace, 'notes.md', 'x'.repeat(MIB));
    expect(await errorCode(note())).toBe('quota_exceeded');
    await expect(note()).rejects.toThrow(/disk quota of 16\.0 MiB/);
    const cleaned = await sh('rm big && echo removed');
    expect(cleaned).toMatchObject({ exitCode: 0, stdout: 'removed\n', killed: null });
    expect(cleaned.disk?.full).toBe(false);
    expect(await note()).toMatchObject({ bytes: MIB });
  });

  it('stops a command that writes many files at the quota while it runs', async () => {
    const { workspace, sh } = await workspaceWith(SMALL_QUOTA, 'agent2');
    // 1 MiB at a time, each file far below any file-size limit: only the watcher can stop this.
    const result = await sh(
      'for i in $(seq 1 400); do head -c 1048576 /dev/zero > "f$i" || exit 9; done; echo all-written',
      120_000,
    );
    expect(result.killed).toBe('disk_quota');
    expect(result.stdout).not.toContain('all-written');
    const written = readdirSync(workspace).filter((name) => name.startsWith('f')).length;
    expect(written).toBeLessThan(400);
    expect(result.disk?.full).toBe(true);
    // The overshoot (what got written between two checks): reported, and far below what the loop would write.
    const overshoot = (result.disk?.usedBytes ?? 0) - 16 * MIB;
    process.stdout.write(`[sandbox quota] ${written} files of 1 MiB, overshoot ${(overshoot / MIB).toFixed(1)} MiB\n`);
    expect(overshoot).toBeLessThan(200 * MIB);
  });

  it('counts a workspace with more entries than the walk may visit as over its quota', async () => {
    const bounds = { walkBounds: { maxEntries: 500, maxDepth: 64, timeoutMs: 30_000 } };
    const { runtime, workspace, sh } = await workspaceWith(bounds, 'agent3');
    const fits = await sh('mkdir d && for i in $(seq 1 100); do : > d/f$i; done');
    expect(fits).toMatchObject({ exitCode: 0, killed: null });
    expect(fits.disk).toMatchObject({ full: false, entries: 101, unmeasured: null });
    const many = await sh('for i in $(seq 1 1000); do : > d/g$i; done');
    expect(many.disk).toMatchObject({ full: true, unmeasured: 'entries' });
    const write = () => runtime.writeFile(workspace, 'one-more.txt', 'x');
    expect(await errorCode(write())).toBe('quota_exceeded');
    expect(await sh('rm -r d')).toMatchObject({ exitCode: 0, killed: null });
    expect(await errorCode(write())).toBe('ok');
  });
});
