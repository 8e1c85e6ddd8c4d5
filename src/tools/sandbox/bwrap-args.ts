/**
 * What a sandbox sees, written down as bubblewrap arguments: every namespace new (network included), the system
 * directories read-only, a short allowlist of /etc (no shadow, no keys, no host configuration beyond what programs
 * need to start and verify TLS), synthetic passwd/group/hosts/nsswitch, private /proc, /dev, /tmp and /dev/shm,
 * the workspace read-write at /workspace, the proxy socket when egress is allowed, a root that is read-only, an
 * environment of a few fixed variables, and the seccomp filter. The limits are applied by a constant wrapper
 * script that receives every value as an argument, so nothing the model writes is ever spliced into shell code.
 */
import { lstatSync, readdirSync, readlinkSync } from 'node:fs';
import type { SandboxLimits } from '../../config/sandbox-limits.ts';
import { SANDBOX_WORKSPACE } from './workspace-paths.ts';

/** The uid/gid commands see inside the sandbox (mapped to the host's sandbox user by the user namespace). */
export const SANDBOX_UID = 1000;
export const SANDBOX_GID = 1000;
/** Where the egress proxy's Unix socket appears inside, and the loopback port the in-sandbox forwarder listens on. */
export const SANDBOX_PROXY_SOCKET = '/run/agentry/proxy.sock';
export const SANDBOX_PROXY_PORT = 3128;

export interface BubblewrapFeatures {
  /** `--disable-userns` (bubblewrap 0.8): no nested user namespaces, a large share of kernel attack surface. */
  disableUserns: boolean;
  /** `--size` for tmpfs mounts (bubblewrap 0.7): bounds /tmp and /dev/shm. */
  tmpfsSize: boolean;
}

export interface BwrapPlan {
  features: BubblewrapFeatures;
  /** Host directory bind-mounted read-write at /workspace. */
  workspace: string;
  /** Host paths of the synthetic /etc files (see `syntheticEtcFiles`). */
  etcFiles: Record<string, string>;
  /** Host path of the egress proxy socket, or null for no network at all. */
  proxySocket: string | null;
  /** The in-sandbox forwarder (socat), needed when `proxySocket` is set. */
  socat: string | null;
  shell: string;
  limits: SandboxLimits;
  command: string;
  /** The descriptor bwrap reads the seccomp filter from (seccomp-filter.ts), or null for none. */
  seccompFd?: number | null | undefined;
}

/** Top-level system directories given to the sandbox: read-only, or as the same symlink (merged /usr). */
const SYSTEM_DIRECTORIES = ['usr', 'bin', 'sbin', 'lib', 'lib32', 'lib64', 'libx32'];

/** What of the host's /etc a sandbox gets (read-only, when present): loader, alternatives, TLS roots, time zone,
 *  protocol tables, release files and language runtimes' own configuration. */
const ETC_ALLOWLIST = [
  'ld.so.cache',
  'ld.so.conf',
  'ld.so.conf.d',
  'alternatives',
  'localtime',
  'timezone',
  'os-release',
  'debian_version',
  'lsb-release',
  'alpine-release',
  'redhat-release',
  'ssl/certs',
  'ssl/openssl.cnf',
  'ssl/cert.pem',
  'pki/tls/certs',
  'pki/ca-trust/extracted',
  'crypto-policies',
  'protocols',
  'services',
  'mime.types',
  'magic',
  'inputrc',
  'perl',
];
/** Per-version configuration directories of language runtimes (python3.11, java-17-openjdk, ...). */
const ETC_PATTERNS = [/^python3(\.\d+)?$/, /^java-[\w.-]+$/];

/** The synthetic /etc files, by name: the sandbox user, no host accounts, localhost only, files-only lookups. */
export function syntheticEtcFiles(): Record<string, string> {
  return {
    passwd:
      'root:x:0:0:root:/root:/usr/sbin/nologin\n' +
      `agent:x:${SANDBOX_UID}:${SANDBOX_GID}:agent:${SANDBOX_WORKSPACE}:/bin/bash\n` +
      'nobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n',
    group: `root:x:0:\nagent:x:${SANDBOX_GID}:\nnogroup:x:65534:\n`,
    hosts: '127.0.0.1\tlocalhost sandbox\n::1\tlocalhost ip6-localhost ip6-loopback\n',
    'nsswitch.conf':
      'passwd: files\ngroup: files\nshadow: files\nhosts: files dns\nnetworks: files\n' +
      'protocols: files\nservices: files\nethers: files\nrpc: files\n',
  };
}

function hostEntry(path: string): 'directory' | 'file' | { symlink: string } | null {
  try {
    const stats = lstatSync(path);
    if (stats.isSymbolicLink()) return { symlink: readlinkSync(path) };
    return stats.isDirectory() ? 'directory' : 'file';
  } catch {
    return null;
  }
}

function systemMounts(): string[] {
  const args: string[] = [];
  for (const name of SYSTEM_DIRECTORIES) {
    const entry = hostEntry(`/${name}`);
    if (entry === null) continue;
    if (typeof entry === 'object') args.push('--symlink', entry.symlink, `/${name}`);
    else args.push('--ro-bind', `/${name}`, `/${name}`);
  }
  return args;
}

function etcMounts(etcFiles: Record<string, string>): string[] {
  const args: string[] = [];
  let names: string[] = [];
  try {
    names = readdirSync('/etc');
  } catch {
    names = [];
  }
  const wanted = [...ETC_ALLOWLIST, ...names.filter((name) => ETC_PATTERNS.some((pattern) => pattern.test(name)))];
  for (const name of wanted) args.push('--ro-bind-try', `/etc/${name}`, `/etc/${name}`);
  for (const [name, hostPath] of Object.entries(etcFiles)) args.push('--ro-bind', hostPath, `/etc/${name}`);
  return args;
}

/**
 * The wrapper run as the sandbox's first process. Positional parameters: 1 command, 2 "1" to start the egress
 * forwarder, 3 socat path, 4 CPU seconds, 5 data KiB, 6 address-space KiB, 7 processes, 8 file-size KiB,
 * 9 open files, 10 shell. It first closes every descriptor but stdio (bubblewrap passes inherited ones on to the
 * command, and one opened outside the sandbox's root would lead out of it). It runs the command as a child (not
 * exec) so that, when the command ends, it can kill whatever the command left running: no process outlives its
 * run. Its own stderr goes to /dev/null once the command starts, so bash's job notices do not reach the output.
 */
export const WRAPPER_SCRIPT = `set -u
for fd in /proc/self/fd/*; do
  fd=\${fd##*/}
  case $fd in 0 | 1 | 2) ;; *) if [[ -e /proc/self/fd/$fd ]]; then exec {fd}>&-; fi ;; esac
done
if [ "$2" = 1 ]; then
  "$3" TCP-LISTEN:${SANDBOX_PROXY_PORT},bind=127.0.0.1,fork,reuseaddr UNIX-CONNECT:${SANDBOX_PROXY_SOCKET} </dev/null >/dev/null 2>&1 &
  ready=0
  for ((i = 0; i < 500; i++)); do
    while read -r _ local _ state _; do
      if [ "$local" = 0100007F:${SANDBOX_PROXY_PORT.toString(16).toUpperCase().padStart(4, '0')} ] && [ "$state" = 0A ]; then ready=1; break; fi
    done </proc/net/tcp
    [ "$ready" = 1 ] && break
    sleep 0.01
  done
  if [ "$ready" != 1 ]; then echo "agentry-sandbox: the egress forwarder did not start" >&2; exit 125; fi
fi
ulimit -c 0 && ulimit -S -t "$4" && ulimit -H -t "$(($4 + 1))" && ulimit -d "$5" && ulimit -v "$6" &&
  ulimit -u "$7" && ulimit -f "$8" && ulimit -n "$9" ||
  { echo "agentry-sandbox: could not apply resource limits" >&2; exit 125; }
exec 3>&2 2>/dev/null
"\${10}" -lc "$1" 2>&3 3>&-
status=$?
kill -KILL -1 2>/dev/null
exit "$status"
`;

const KIB = 1024;

/** Environment of every command: nothing from the server, only these (and the proxy variables with egress). */
export function sandboxEnvironment(withProxy: boolean): Record<string, string> {
  const env: Record<string, string> = {
    PATH: '/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin',
    HOME: SANDBOX_WORKSPACE,
    USER: 'agent',
    LOGNAME: 'agent',
    SHELL: '/bin/bash',
    LANG: 'C.UTF-8',
    TERM: 'dumb',
    TMPDIR: '/tmp',
  };
  if (withProxy) {
    const proxy = `http://127.0.0.1:${SANDBOX_PROXY_PORT}`;
    const noProxy = 'localhost,127.0.0.1,::1';
    Object.assign(env, {
      HTTP_PROXY: proxy,
      HTTPS_PROXY: proxy,
      NO_PROXY: noProxy,
      http_proxy: proxy,
      https_proxy: proxy,
      no_proxy: noProxy,
      // Node's built-in fetch and http clients honour the variables only when asked to (Node 22.21 / 24.5).
      NODE_USE_ENV_PROXY: '1',
    });
  }
  return env;
}

/** The full bubblewrap argument list for one command. */
export function bwrapArgs(plan: BwrapPlan): string[] {
  const { features, limits } = plan;
  const sized = (bytes: number) => (features.tmpfsSize ? ['--size', String(bytes)] : []);
  const withProxy = plan.proxySocket !== null;
  const args = [
    '--unshare-all',
    '--unshare-user',
    ...(features.disableUserns ? ['--disable-userns'] : []),
    '--uid',
    String(SANDBOX_UID),
    '--gid',
    String(SANDBOX_GID),
    '--hostname',
    'sandbox',
    '--die-with-parent',
    '--new-session',
    ...(plan.seccompFd === null || plan.seccompFd === undefined ? [] : ['--seccomp', String(plan.seccompFd)]),
    ...systemMounts(),
    ...etcMounts(plan.etcFiles),
    '--proc',
    '/proc',
    '--dev',
    '/dev',
    ...sized(limits.tmpBytes),
    '--tmpfs',
    '/tmp',
    ...sized(limits.tmpBytes),
    '--tmpfs',
    '/dev/shm',
    '--symlink',
    '../tmp',
    '/var/tmp',
    '--bind',
    plan.workspace,
    SANDBOX_WORKSPACE,
    ...(plan.proxySocket === null ? [] : ['--bind', plan.proxySocket, SANDBOX_PROXY_SOCKET]),
    '--remount-ro',
    '/',
    '--chdir',
    SANDBOX_WORKSPACE,
    '--clearenv',
  ];
  for (const [name, value] of Object.entries(sandboxEnvironment(withProxy))) args.push('--setenv', name, value);
  args.push(
    '--',
    plan.shell,
    '--noprofile',
    '--norc',
    '-c',
    WRAPPER_SCRIPT,
    'agentry-sandbox',
    plan.command,
    withProxy ? '1' : '0',
    plan.socat ?? '',
    String(limits.cpuSeconds),
    String(Math.max(1, Math.floor(limits.memoryBytes / KIB))),
    String(Math.max(1, Math.floor(limits.addressSpaceBytes / KIB))),
    String(limits.processes),
    String(Math.max(1, Math.floor(limits.fileSizeBytes / KIB))),
    String(limits.openFiles),
    plan.shell,
  );
  return args;
}
