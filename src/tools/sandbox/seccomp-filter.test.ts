import { describe, expect, it } from 'vitest';
import {
  AUDIT_ARCH,
  ENOSYS,
  EOPNOTSUPP,
  EPERM,
  SECCOMP_RET_ALLOW,
  SECCOMP_RULES,
  type SeccompArch,
  seccompArch,
  seccompProgram,
} from './seccomp-filter.ts';

/** A call as the kernel hands it to the filter: struct seccomp_data. */
interface Call {
  arch?: number;
  nr: number;
  args?: number[];
}

/**
 * Runs a classic-BPF program over one call, the way the kernel does, for the instructions a filter may use.
 * Independent of the generator: it decodes the bytes bubblewrap would read.
 */
function evaluate(program: Buffer, call: Call, arch: SeccompArch): number {
  const data = Buffer.alloc(64);
  data.writeInt32LE(call.nr, 0);
  data.writeUInt32LE(call.arch ?? AUDIT_ARCH[arch], 4);
  (call.args ?? []).forEach((value, index) => {
    data.writeBigUInt64LE(BigInt(value), 16 + 8 * index);
  });
  let accumulator = 0;
  for (let pc = 0; pc < program.length / 8; ) {
    const code = program.readUInt16LE(pc * 8);
    const jt = program.readUInt8(pc * 8 + 2);
    const jf = program.readUInt8(pc * 8 + 3);
    const k = program.readUInt32LE(pc * 8 + 4);
    switch (code) {
      case 0x20: // ld [k]
        accumulator = data.readUInt32LE(k);
        pc += 1;
        break;
      case 0x15: // jeq #k
        pc += 1 + (accumulator === k ? jt : jf);
        break;
      case 0x35: // jge #k
        pc += 1 + (accumulator >= k ? jt : jf);
        break;
      case 0x45: // jset #k
        pc += 1 + ((accumulator & k) !== 0 ? jt : jf);
        break;
      case 0x06: // ret #k
        return k;
      default:
        throw new Error(`unexpected opcode ${code.toString(16)} at ${pc}`);
    }
  }
  throw new Error('the program ran off its end');
}

const errno = (value: number) => 0x0005_0000 | value;
const nr = (arch: SeccompArch, name: string) => {
  const rule = SECCOMP_RULES[arch].find((candidate) => candidate.name === name);
  if (rule === undefined) throw new Error(`${name} is not in the ${arch} table`);
  return rule.nr;
};
const O_CREAT = 0o100;
const O_WRONLY = 0o1;
const O_TMPFILE = 0o20000000 | 0o200000;

describe('the seccomp filter', () => {
  it('is encoded as struct sock_filter: 8 little-endian bytes per instruction, arch first', () => {
    const program = seccompProgram('x64');
    expect(program.length % 8).toBe(0);
    expect(program.length / 8).toBeLessThan(4096); // BPF_MAXINSNS
    // ld [4] (seccomp_data.arch), then jeq AUDIT_ARCH_X86_64 (on to the next instruction, else far ahead).
    expect(program.subarray(0, 8).toString('hex')).toBe('2000000004000000');
    expect(program.subarray(8, 11).toString('hex')).toBe('150000');
    expect(program.readUInt8(11)).toBeGreaterThan(0);
    expect(program.readUInt32LE(12)).toBe(0xc000003e);
    // Every jump lands inside the program, and the last instruction returns.
    for (let pc = 0; pc < program.length / 8; pc++) {
      const code = program.readUInt16LE(pc * 8);
      if ((code & 0x07) === 0x05) {
        expect(pc + 1 + Math.max(program.readUInt8(pc * 8 + 2), program.readUInt8(pc * 8 + 3))).toBeLessThan(
          program.length / 8,
        );
      }
    }
    expect(program.readUInt16LE(program.length - 8)).toBe(0x06);
    expect(seccompArch('x64')).toBe('x64');
    expect(seccompArch('arm64')).toBe('arm64');
    expect(seccompArch('riscv64')).toBeNull();
  });

  describe.each(['x64', 'arm64'] as const)('on %s', (arch) => {
    const program = seccompProgram(arch);
    const run = (call: Call) => evaluate(program, call, arch);

    it('refuses to set setuid or setgid bits with chmod and its relatives, allows any other mode', () => {
      const calls: [string, number][] = [
        ['fchmod', 1],
        ['fchmodat', 2],
        ['fchmodat2', 2],
        ...(arch === 'x64' ? ([['chmod', 1]] as [string, number][]) : []),
      ];
      for (const [name, index] of calls) {
        const withMode = (mode: number) => {
          const args = [3, 0, 0, 0];
          args[index] = mode;
          return run({ nr: nr(arch, name), args });
        };
        expect(withMode(0o4755), name).toBe(errno(EPERM));
        expect(withMode(0o2755), name).toBe(errno(EPERM));
        expect(withMode(0o6777), name).toBe(errno(EPERM));
        expect(withMode(0o755), name).toBe(SECCOMP_RET_ALLOW);
        expect(withMode(0o1777), name).toBe(SECCOMP_RET_ALLOW); // sticky is harmless
        expect(withMode(0o777), name).toBe(SECCOMP_RET_ALLOW);
      }
    });

    it('refuses to create a file with those bits (open, openat, creat, mknod), and only when creating', () => {
      const openat = nr(arch, 'openat');
      expect(run({ nr: openat, args: [-100 >>> 0, 0, O_CREAT | O_WRONLY, 0o4755] })).toBe(errno(EPERM));
      expect(run({ nr: openat, args: [-100 >>> 0, 0, O_TMPFILE | O_WRONLY, 0o2700] })).toBe(errno(EPERM));
      expect(run({ nr: openat, args: [-100 >>> 0, 0, O_CREAT | O_WRONLY, 0o755] })).toBe(SECCOMP_RET_ALLOW);
      // Without O_CREAT the mode argument is ignored by the kernel, whatever garbage it holds.
      expect(run({ nr: openat, args: [-100 >>> 0, 0, O_WRONLY, 0o4755] })).toBe(SECCOMP_RET_ALLOW);
      expect(run({ nr: nr(arch, 'mknodat'), args: [-100 >>> 0, 0, 0o100000 | 0o4755, 0] })).toBe(errno(EPERM));
      expect(run({ nr: nr(arch, 'mknodat'), args: [-100 >>> 0, 0, 0o010644, 0] })).toBe(SECCOMP_RET_ALLOW);
      if (arch === 'x64') {
        expect(run({ nr: nr(arch, 'open'), args: [0, O_CREAT, 0o4755] })).toBe(errno(EPERM));
        expect(run({ nr: nr(arch, 'open'), args: [0, O_CREAT, 0o644] })).toBe(SECCOMP_RET_ALLOW);
        expect(run({ nr: nr(arch, 'creat'), args: [0, 0o6755] })).toBe(errno(EPERM));
        expect(run({ nr: nr(arch, 'creat'), args: [0, 0o755] })).toBe(SECCOMP_RET_ALLOW);
        expect(run({ nr: nr(arch, 'mknod'), args: [0, 0o100000 | 0o2755, 0] })).toBe(errno(EPERM));
      }
    });

    it('sends openat2 and io_uring to their fallbacks (ENOSYS)', () => {
      for (const name of ['openat2', 'io_uring_setup', 'io_uring_enter', 'io_uring_register']) {
        expect(run({ nr: nr(arch, name), args: [0, 0, 0, 0] }), name).toBe(errno(ENOSYS));
      }
    });

    it('allows plain and hole-punching fallocate only', () => {
      const fallocate = nr(arch, 'fallocate');
      expect(run({ nr: fallocate, args: [3, 0, 0, 4096] })).toBe(SECCOMP_RET_ALLOW);
      expect(run({ nr: fallocate, args: [3, 0x03, 0, 4096] })).toBe(SECCOMP_RET_ALLOW); // PUNCH_HOLE|KEEP_SIZE
      expect(run({ nr: fallocate, args: [3, 0x01, 0, 4096] })).toBe(errno(EOPNOTSUPP)); // KEEP_SIZE
      expect(run({ nr: fallocate, args: [3, 0x10, 0, 4096] })).toBe(errno(EOPNOTSUPP)); // ZERO_RANGE
      expect(run({ nr: fallocate, args: [3, 0x20, 0, 4096] })).toBe(errno(EOPNOTSUPP)); // INSERT_RANGE
    });

    it('allows everything else, and refuses calls of another ABI rather than misreading them', () => {
      for (const other of [0, 1, 3, 59, 63, 64, 221, 231, 300]) {
        if (SECCOMP_RULES[arch].some((rule) => rule.nr === other)) continue;
        expect(run({ nr: other, args: [0o4755, 0o4755, 0o4755, 0o4755] }), String(other)).toBe(SECCOMP_RET_ALLOW);
      }
      // i386 (int 0x80) or arm32 compat numbering: refused wholesale.
      expect(run({ nr: 15, arch: 0x4000_0003, args: [0, 0o644] })).toBe(errno(ENOSYS));
      expect(run({ nr: 15, arch: 0x4000_0028, args: [0, 0o644] })).toBe(errno(ENOSYS));
      if (arch === 'x64') expect(run({ nr: 0x4000_0000 | 90, args: [0, 0o4755] })).toBe(errno(ENOSYS)); // x32
    });
  });
});
