/**
 * The seccomp filter every sandbox runs under (bubblewrap's `--seccomp FD`): a classic-BPF program, generated
 * here, that keeps a command from making setuid or setgid files and from allocating disk space past the file
 * size limit. The workspace is mounted nosuid inside, but on the host it is an ordinary directory: a setuid copy
 * of bash left there would run as the sandbox's host user for anyone who could reach it. The kernel honours
 * S_ISUID/S_ISGID in chmod's mode and in the mode of a file created by open, creat or mknod (verified: open with
 * O_CREAT and 04755 makes a setuid file), so those calls are refused with EPERM when their mode has either bit.
 * `openat2` takes its mode inside a struct in memory, which BPF cannot read: it is refused with ENOSYS, and libc
 * falls back to openat. io_uring would open files without passing through this filter: ENOSYS too.
 * `fallocate` with FALLOC_FL_KEEP_SIZE allocates blocks past the end of a file without the RLIMIT_FSIZE check
 * (verified: 200 MB under `ulimit -f 1024`), so only mode 0 (checked against the limit) and punching holes are
 * allowed; other modes get EOPNOTSUPP, which programs already handle (posix_fallocate then writes).
 * Everything else is allowed. System calls of another ABI (i386 or x32 on x86_64, arm32 on aarch64) number
 * their calls differently, so they are refused (ENOSYS) rather than checked against the wrong table.
 */

/** Architectures we have a syscall table for (Node's `process.arch`). */
export type SeccompArch = 'x64' | 'arm64';

export function seccompArch(arch: string = process.arch): SeccompArch | null {
  return arch === 'x64' || arch === 'arm64' ? arch : null;
}

// struct seccomp_data: int nr; __u32 arch; __u64 instruction_pointer; __u64 args[6] (little-endian on both).
const OFFSET_NR = 0;
const OFFSET_ARCH = 4;
/** The low 32 bits of argument i: modes and flags are 32-bit, and the bits we test are in the low word. */
const argLow = (index: number) => 16 + 8 * index;

// Classic BPF opcodes (linux/bpf_common.h).
const LD_W_ABS = 0x20;
const JMP_JEQ_K = 0x15;
const JMP_JGE_K = 0x35;
const JMP_JSET_K = 0x45;
const RET_K = 0x06;

export const SECCOMP_RET_ALLOW = 0x7fff_0000;
const SECCOMP_RET_ERRNO = 0x0005_0000;
export const EPERM = 1;
export const ENOSYS = 38;
export const EOPNOTSUPP = 95;

export const AUDIT_ARCH: Record<SeccompArch, number> = { x64: 0xc000_003e, arm64: 0xc000_00b7 };
/** x32 system calls on x86_64 carry this bit in their number (and the x86_64 audit arch). */
const X32_SYSCALL_BIT = 0x4000_0000;
const SET_ID_BITS = 0o6000;
/** O_CREAT | __O_TMPFILE: the open flags under which the mode argument is used (same values on both arches). */
const CREATING = 0o100 | 0o20000000;
const FALLOC_FL_KEEP_SIZE = 0x01;
const FALLOC_FL_PUNCH_HOLE = 0x02;

/** What the filter checks for one system call. */
type Check =
  | { kind: 'mode'; mode: number }
  | { kind: 'create'; flags: number; mode: number }
  | { kind: 'fallocate'; mode: number }
  | { kind: 'nosys' };

type Rule = { name: string; nr: number; check: Check };

const mode = (index: number): Check => ({ kind: 'mode', mode: index });
const create = (flags: number, modeIndex: number): Check => ({ kind: 'create', flags, mode: modeIndex });
const NOSYS: Check = { kind: 'nosys' };

/** The same calls on both arches, numbered from asm-generic/unistd.h; aarch64 has no legacy open/chmod/mknod. */
const COMMON: Rule[] = [
  { name: 'io_uring_setup', nr: 425, check: NOSYS },
  { name: 'io_uring_enter', nr: 426, check: NOSYS },
  { name: 'io_uring_register', nr: 427, check: NOSYS },
  { name: 'openat2', nr: 437, check: NOSYS },
  { name: 'fchmodat2', nr: 452, check: mode(2) },
];

export const SECCOMP_RULES: Record<SeccompArch, Rule[]> = {
  x64: [
    { name: 'open', nr: 2, check: create(1, 2) },
    { name: 'creat', nr: 85, check: mode(1) },
    { name: 'chmod', nr: 90, check: mode(1) },
    { name: 'fchmod', nr: 91, check: mode(1) },
    { name: 'mknod', nr: 133, check: mode(1) },
    { name: 'openat', nr: 257, check: create(2, 3) },
    { name: 'mknodat', nr: 259, check: mode(2) },
    { name: 'fchmodat', nr: 268, check: mode(2) },
    { name: 'fallocate', nr: 285, check: { kind: 'fallocate', mode: 1 } },
    ...COMMON,
  ],
  arm64: [
    { name: 'mknodat', nr: 33, check: mode(2) },
    { name: 'fallocate', nr: 47, check: { kind: 'fallocate', mode: 1 } },
    { name: 'fchmod', nr: 52, check: mode(1) },
    { name: 'fchmodat', nr: 53, check: mode(2) },
    { name: 'openat', nr: 56, check: create(2, 3) },
    ...COMMON,
  ],
};

/** One instruction; a jump target is a label resolved when the program is assembled. */
type Target = number | string;
interface Instruction {
  code: number;
  k: number;
  jt: Target;
  jf: Target;
  label?: string | undefined;
}

/** Assembles instructions with labelled forward jumps into `struct sock_filter[]` (8 bytes each, little-endian). */
function assemble(instructions: Instruction[]): Buffer {
  const labels = new Map<string, number>();
  instructions.forEach((instruction, index) => {
    if (instruction.label !== undefined) labels.set(instruction.label, index);
  });
  const offset = (from: number, target: Target): number => {
    if (typeof target === 'number') return target;
    const to = labels.get(target);
    const distance = to === undefined ? -1 : to - from - 1;
    if (distance < 0 || distance > 255) throw new Error(`seccomp filter: bad jump to ${target}`);
    return distance;
  };
  const buffer = Buffer.alloc(instructions.length * 8);
  instructions.forEach((instruction, index) => {
    buffer.writeUInt16LE(instruction.code, index * 8);
    buffer.writeUInt8(offset(index, instruction.jt), index * 8 + 2);
    buffer.writeUInt8(offset(index, instruction.jf), index * 8 + 3);
    buffer.writeUInt32LE(instruction.k >>> 0, index * 8 + 4);
  });
  return buffer;
}

const load = (offset: number, label?: string): Instruction => ({ code: LD_W_ABS, k: offset, jt: 0, jf: 0, label });
const jump = (code: number, k: number, jt: Target, jf: Target): Instruction => ({ code, k, jt, jf });
const ret = (k: number, label?: string): Instruction => ({ code: RET_K, k, jt: 0, jf: 0, label });

/** The instructions that check one call's arguments, starting at `label`; they end in a return. */
function checkBlock(label: string, check: Check): Instruction[] {
  switch (check.kind) {
    case 'mode':
      return [load(argLow(check.mode), label), jump(JMP_JSET_K, SET_ID_BITS, 'eperm', 'allow')];
    case 'create':
      return [
        load(argLow(check.flags), label),
        jump(JMP_JSET_K, CREATING, 0, 'allow'),
        load(argLow(check.mode)),
        jump(JMP_JSET_K, SET_ID_BITS, 'eperm', 'allow'),
      ];
    case 'fallocate':
      return [
        load(argLow(check.mode), label),
        jump(JMP_JEQ_K, 0, 'allow', 0),
        jump(JMP_JEQ_K, FALLOC_FL_KEEP_SIZE | FALLOC_FL_PUNCH_HOLE, 'allow', 0),
        ret(SECCOMP_RET_ERRNO | EOPNOTSUPP),
      ];
    case 'nosys':
      return [];
  }
}

/** The filter for `arch` as bubblewrap reads it from `--seccomp FD`. */
export function seccompProgram(arch: SeccompArch): Buffer {
  const rules = SECCOMP_RULES[arch];
  const checkLabel = (rule: Rule) => (rule.check.kind === 'nosys' ? 'nosys' : `check_${rule.name}`);
  const program: Instruction[] = [
    load(OFFSET_ARCH),
    jump(JMP_JEQ_K, AUDIT_ARCH[arch], 0, 'nosys'),
    load(OFFSET_NR),
    ...(arch === 'x64' ? [jump(JMP_JGE_K, X32_SYSCALL_BIT, 'nosys', 0)] : []),
    ...rules.map((rule) => jump(JMP_JEQ_K, rule.nr, checkLabel(rule), 0)),
    ret(SECCOMP_RET_ALLOW),
    ...rules.flatMap((rule) => checkBlock(checkLabel(rule), rule.check)),
    // Shared returns last: classic BPF jumps only forward.
    ret(SECCOMP_RET_ALLOW, 'allow'),
    ret(SECCOMP_RET_ERRNO | EPERM, 'eperm'),
    ret(SECCOMP_RET_ERRNO | ENOSYS, 'nosys'),
  ];
  return assemble(program);
}
