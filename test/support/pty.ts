import { spawn, spawnSync, type ChildProcess } from 'node:child_process';

/**
 * A command under a real pseudo-terminal, without native addons: python3's `pty` module (a
 * 120x40 terminal), else util-linux `script`. Keystrokes go in through `write`, the screen's
 * bytes come out through `output()` (ANSI escapes stripped by `text()`).
 */
const PY_DRIVER = `
import fcntl, os, pty, select, struct, sys, termios
pid, fd = pty.fork()
if pid == 0:
    os.execvp(sys.argv[1], sys.argv[1:])
fcntl.ioctl(fd, termios.TIOCSWINSZ, struct.pack('HHHH', 40, 120, 0, 0))
stdin_open = True
while True:
    readable = select.select([fd] + ([0] if stdin_open else []), [], [])[0]
    if fd in readable:
        try:
            data = os.read(fd, 65536)
        except OSError:
            data = b''
        if not data:
            break
        os.write(1, data)
    if 0 in readable:
        data = os.read(0, 65536)
        if data:
            os.write(fd, data)
        else:
            stdin_open = False
_, status = os.waitpid(pid, 0)
sys.exit(os.waitstatus_to_exitcode(status))
`;

export type PtyLauncher = (argv: string[]) => [string, string[]];

export function ptyLauncher(): PtyLauncher | null {
  if (spawnSync('python3', ['-c', 'import pty, termios, fcntl'], { stdio: 'ignore' }).status === 0) {
    return (argv) => ['python3', ['-c', PY_DRIVER, ...argv]];
  }
  if (spawnSync('script', ['--version'], { stdio: 'ignore' }).status === 0) {
    const quote = (word: string) => `'${word.replace(/'/g, `'\\''`)}'`;
    return (argv) => ['script', ['-qfec', argv.map(quote).join(' '), '/dev/null']];
  }
  return null;
}

export interface PtySession {
  child: ChildProcess;
  write(keys: string): void;
  output(): string;
  /** The output with ANSI escapes removed, from `from` (an output() length) on. */
  text(from?: number): string;
  waitFor(pattern: string | RegExp, options?: { from?: number; timeoutMs?: number }): Promise<void>;
  exited: Promise<number | null>;
}

const ANSI = /\x1b\[[0-9;?]*[A-Za-z]|\x1b[=>]|\r/g;

export function startPty(launch: PtyLauncher, argv: string[], options: { env: Record<string, string>; cwd?: string }): PtySession {
  const [program, args] = launch(argv);
  const child = spawn(program, args, { env: options.env, ...(options.cwd ? { cwd: options.cwd } : {}), stdio: ['pipe', 'pipe', 'pipe'] });
  let output = '';
  child.stdout!.on('data', (chunk) => (output += chunk));
  child.stderr!.on('data', (chunk) => (output += chunk));
  const exited = new Promise<number | null>((resolve) => child.on('close', (code) => resolve(code)));
  const text = (from = 0) => output.slice(from).replace(ANSI, '');
  return {
    child,
    write: (keys) => void child.stdin!.write(keys),
    output: () => output,
    text,
    async waitFor(pattern, waitOptions = {}) {
      const deadline = Date.now() + (waitOptions.timeoutMs ?? 20_000);
      const matches = () => (typeof pattern === 'string' ? text(waitOptions.from).includes(pattern) : pattern.test(text(waitOptions.from)));
      while (!matches()) {
        if (Date.now() > deadline || child.exitCode !== null) throw new Error(`the terminal never showed ${pattern}; it shows:\n${text(waitOptions.from)}`);
        await new Promise((resolve) => setTimeout(resolve, 25));
      }
    },
    exited,
  };
}
