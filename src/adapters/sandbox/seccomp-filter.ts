/**
 * A classic-BPF seccomp program (the format `bwrap --seccomp FD` loads) that keeps set-id bits off
 * every file the agent creates or changes, so that no setuid/setgid file it writes in its workdir
 * can ever be run with its owner's ids by a user of the host:
 * - chmod, fchmod, fchmodat, fchmodat2, mknod, mknodat and creat with S_ISUID or S_ISGID in the
 *   mode fail with EPERM; so do open and openat that create (O_CREAT, O_TMPFILE) with such a mode;
 * - openat2 (its mode sits in a struct the filter cannot read) and io_uring_setup (io_uring opens
 *   files without syscalls the filter sees) fail with ENOSYS: callers fall back to openat;
 * - on x86_64, the x32 ABI (syscall numbers with bit 30 set) fails with ENOSYS; i386 programs are
 *   filtered with i386 numbers.
 * Everything else is allowed. Assembled here as bytes (struct sock_filter, 8 bytes each, host
 * byte order): no native addon, no libseccomp. Hosts other than little-endian x86_64 and aarch64
 * get no program (`null`), which the launcher reports.
 */
const LD_W_ABS = 0x20;
const JEQ_K = 0x15;
const JGE_K = 0x35;
const JSET_K = 0x45;
const RET_K = 0x06;

const RET_ALLOW = 0x7fff0000;
const retErrno = (errno: number): number => 0x00050000 | errno;
const EPERM = 1;
const ENOSYS = 38;

const SET_ID_BITS = 0o6000;
/** O_CREAT | __O_TMPFILE: the same values on x86 and the generic (aarch64) ABI. */
const CREATING_FLAGS = 0o100 | 0o20000000;
const X32_SYSCALL_BIT = 0x40000000;

const OFFSET_NR = 0;
const OFFSET_ARCH = 4;
/** Low 32 bits of argument `index` (little-endian). */
const argLow = (index: number): number => 16 + 8 * index;

type Rule =
  | { kind: 'mode'; modeArg: number }
  | { kind: 'create'; flagsArg: number; modeArg: number }
  | { kind: 'deny'; errno: number };

interface ArchTable {
  audit: number;
  rejectX32?: boolean;
  syscalls: Array<[number, Rule]>;
}

const mode = (modeArg: number): Rule => ({ kind: 'mode', modeArg });
const create = (flagsArg: number, modeArg: number): Rule => ({ kind: 'create', flagsArg, modeArg });
const ENOSYS_RULE: Rule = { kind: 'deny', errno: ENOSYS };

const X86_64: ArchTable = {
  audit: 0xc000003e,
  rejectX32: true,
  syscalls: [[2, create(1, 2)], [85, mode(1)], [90, mode(1)], [91, mode(1)], [133, mode(1)], [257, create(2, 3)], [259, mode(2)], [268, mode(2)], [452, mode(2)], [437, ENOSYS_RULE], [425, ENOSYS_RULE]],
};
const I386: ArchTable = {
  audit: 0x40000003,
  syscalls: [[5, create(1, 2)], [8, mode(1)], [14, mode(1)], [15, mode(1)], [94, mode(1)], [295, create(2, 3)], [297, mode(2)], [306, mode(2)], [452, mode(2)], [437, ENOSYS_RULE], [425, ENOSYS_RULE]],
};
const AARCH64: ArchTable = {
  audit: 0xc00000b7,
  syscalls: [[52, mode(1)], [53, mode(2)], [33, mode(2)], [56, create(2, 3)], [452, mode(2)], [437, ENOSYS_RULE], [425, ENOSYS_RULE]],
};

interface Instruction {
  code: number;
  k: number;
  /** Jump targets as labels (resolved to relative offsets) for conditional jumps. */
  jt?: string;
  jf?: string;
}

/** A tiny assembler: instructions with labelled jump targets, then resolved to offsets. */
class Program {
  private readonly instructions: Instruction[] = [];
  private readonly labels = new Map<string, number>();

  label(name: string): void {
    this.labels.set(name, this.instructions.length);
  }

  load(offset: number): void {
    this.instructions.push({ code: LD_W_ABS, k: offset });
  }

  jump(options: { code: number; k: number; ifTrue: string; ifFalse: string }): void {
    this.instructions.push({ code: options.code, k: options.k, jt: options.ifTrue, jf: options.ifFalse });
  }

  ret(value: number): void {
    this.instructions.push({ code: RET_K, k: value });
  }

  assemble(): Buffer {
    const buffer = Buffer.alloc(this.instructions.length * 8);
    this.instructions.forEach((instruction, index) => {
      const offset = (label: string | undefined): number => {
        if (label === undefined) return 0;
        const target = this.labels.get(label);
        if (target === undefined || target <= index || target - index - 1 > 255) throw new Error(`seccomp: bad jump to ${label}`);
        return target - index - 1;
      };
      buffer.writeUInt16LE(instruction.code, index * 8);
      buffer.writeUInt8(offset(instruction.jt), index * 8 + 2);
      buffer.writeUInt8(offset(instruction.jf), index * 8 + 3);
      buffer.writeUInt32LE(instruction.k >>> 0, index * 8 + 4);
    });
    return buffer;
  }
}

function emitArch(program: Program, table: ArchTable, name: string): void {
  program.label(name);
  program.load(OFFSET_NR);
  if (table.rejectX32) program.jump({ code: JGE_K, k: X32_SYSCALL_BIT, ifTrue: 'enosys', ifFalse: `${name}-0` });
  table.syscalls.forEach(([nr], index) => {
    program.label(`${name}-${index}`);
    program.jump({ code: JEQ_K, k: nr, ifTrue: `${name}-rule-${index}`, ifFalse: index + 1 < table.syscalls.length ? `${name}-${index + 1}` : 'allow' });
  });
  table.syscalls.forEach(([, rule], index) => {
    program.label(`${name}-rule-${index}`);
    if (rule.kind === 'deny') return program.ret(retErrno(rule.errno));
    if (rule.kind === 'create') {
      program.load(argLow(rule.flagsArg));
      program.jump({ code: JSET_K, k: CREATING_FLAGS, ifTrue: `${name}-mode-${index}`, ifFalse: 'allow' });
    }
    program.label(`${name}-mode-${index}`);
    program.load(argLow(rule.modeArg));
    program.jump({ code: JSET_K, k: SET_ID_BITS, ifTrue: 'eperm', ifFalse: 'allow' });
  });
}

/** The filter for this host, or null when its architecture is not covered. */
export function setIdSeccompFilter(arch: string = process.arch, endianness: string = osEndianness()): Buffer | null {
  if (endianness !== 'LE') return null;
  const tables = arch === 'x64' ? [X86_64, I386] : arch === 'arm64' ? [AARCH64] : null;
  if (tables === null) return null;
  const program = new Program();
  program.load(OFFSET_ARCH);
  tables.forEach((table, index) => {
    program.jump({ code: JEQ_K, k: table.audit, ifTrue: `arch-${index}`, ifFalse: index + 1 < tables.length ? `check-${index + 1}` : 'eperm' });
    if (index + 1 < tables.length) program.label(`check-${index + 1}`);
  });
  tables.forEach((table, index) => emitArch(program, table, `arch-${index}`));
  program.label('allow');
  program.ret(RET_ALLOW);
  program.label('eperm');
  program.ret(retErrno(EPERM));
  program.label('enosys');
  program.ret(retErrno(ENOSYS));
  return program.assemble();
}

function osEndianness(): string {
  return new Uint8Array(new Uint16Array([1]).buffer)[0] === 1 ? 'LE' : 'BE';
}
