import type { ShellParser, ShellSyntaxNode } from './shell-syntax.js';

/** Stands for the value of an expansion (`$x`, `$(…)`, a brace or glob expansion) inside a word: no rule's literal text matches it. */
export const DYNAMIC = '\u0000';

/**
 * One simple command as it would run: its name without path or backslash (`/bin/rm`, `\rm` → `rm`),
 * leading assignments dropped and wrappers (`command`, `env`, `nice`, `timeout`, `xargs`, `sudo`,
 * `nohup`, `exec`…) unwrapped; `args` with quotes removed and each expansion as DYNAMIC.
 */
export interface SimpleCommand {
  name: string;
  args: string[];
}

/** Every simple command a bash command line can run, and what in it cannot be decided before it runs. */
export interface BashAnalysis {
  commands: SimpleCommand[];
  /** Why the line cannot be checked statically (`eval` of a variable, `${x@P}`, a parse error…); empty when it can. */
  undecidable: string[];
  /** Bare assignments (`PATH=…` alone): no command runs, but an allow rule must still cover them. */
  assignments: string[];
}

/** Nested `bash -c` strings are parsed again up to this depth; deeper is undecidable. */
const MAX_NESTING = 4;

const SHELLS = new Set(['bash', 'sh', 'dash', 'zsh', 'ksh', 'mksh', 'ash', 'busybox']);
/** Per wrapper: its options that take a value (the next word), and how many operands come before the command. */
const WRAPPERS: Record<string, { valued: string[]; operands?: number; appendsInput?: boolean }> = {
  command: { valued: [] },
  builtin: { valued: [] },
  exec: { valued: ['-a'] },
  nohup: { valued: [] },
  time: { valued: ['-f', '-o'] },
  env: { valued: ['-u', '-C', '--unset', '--chdir'] },
  nice: { valued: ['-n', '--adjustment'] },
  ionice: { valued: ['-c', '-n', '-p', '-P', '-u', '--class', '--classdata'] },
  timeout: { valued: ['-s', '-k', '--signal', '--kill-after'], operands: 1 },
  stdbuf: { valued: ['-i', '-o', '-e', '--input', '--output', '--error'] },
  setsid: { valued: [] },
  sudo: { valued: ['-u', '-g', '-C', '-D', '-h', '-p', '-r', '-t', '-U', '--user', '--group', '--chdir', '--prompt'] },
  doas: { valued: ['-u', '-C'] },
  xargs: { valued: ['-I', '-n', '-P', '-L', '-d', '-E', '-s', '-a', '--max-args', '--max-procs', '--delimiter', '--arg-file', '--replace'], appendsInput: true },
};

/**
 * Expansions that evaluate a value as shell text: prompt expansion (`${x@P}`) runs a command
 * substitution held in the variable, and indirection (`${!x}`) evaluates an array subscript in it.
 * Listing names or keys (`${!pre*}`, `${!arr[@]}`) evaluates nothing.
 */
const EVALUATING_EXPANSION = /^\$\{[^}]*@P\}$|^\$\{!(?![A-Za-z_][A-Za-z0-9_]*(\*|@|\[[@*]\])\}$)/;

/**
 * Parses `command` and lists every simple command in every nesting (lists, pipelines, subshells,
 * groups, control flow, functions, command and process substitutions, here-documents, literal
 * `bash -c`/`eval` strings), normalised; anything whose effect depends on values known only when
 * it runs is named in `undecidable`.
 */
export async function analyzeBash(parser: ShellParser, command: string): Promise<BashAnalysis> {
  const analysis: BashAnalysis = { commands: [], undecidable: [], assignments: [] };
  await analyzeInto(parser, command, analysis, 0);
  return analysis;
}

async function analyzeInto(parser: ShellParser, source: string, analysis: BashAnalysis, nesting: number): Promise<void> {
  if (nesting > MAX_NESTING) {
    analysis.undecidable.push('shell strings nested too deep');
    return;
  }
  const tree = await parser.parse(source);
  if (!tree.complete) analysis.undecidable.push('the command does not parse as bash');
  const nested: string[] = [];
  walk(tree.root, { analysis, nested });
  for (const text of nested) await analyzeInto(parser, text, analysis, nesting + 1);
}

interface WalkState {
  analysis: BashAnalysis;
  /** Literal shell text that runs as a command line of its own (`bash -c '…'`, `eval '…'`), parsed after the walk. */
  nested: string[];
}

function walk(node: ShellSyntaxNode, state: WalkState): void {
  switch (node.type) {
    case 'ERROR':
      state.analysis.undecidable.push('the command does not parse as bash');
      return;
    case 'command':
      simpleCommand(node, state);
      return;
    case 'variable_assignment':
    case 'variable_assignments':
      if (node.type === 'variable_assignment') state.analysis.assignments.push(node.text);
      for (const child of node.children) walk(child, state);
      return;
    case 'declaration_command':
    case 'unset_command': {
      // `export`, `declare`, `local`, `readonly`, `unset`: a command an allow rule must cover; their assignments are its arguments, not bare assignments.
      const args: string[] = [];
      for (const child of node.children) {
        if (child.type === 'variable_assignment') for (const part of child.children) walk(part, state);
        else walk(child, state);
        args.push(child.type === 'variable_assignment' ? child.text : wordValue(child));
      }
      state.analysis.commands.push({ name: node.text.split(/\s/, 1)[0]!, args });
      return;
    }
    case 'expansion':
      if (EVALUATING_EXPANSION.test(node.text)) state.analysis.undecidable.push(`${node.text} expands a value as shell text`);
      break;
    default:
      break;
  }
  for (const child of node.children) walk(child, state);
}

/** The name and argument nodes of a `command` node, in order. */
function commandWords(node: ShellSyntaxNode): ShellSyntaxNode[] {
  const out: ShellSyntaxNode[] = [];
  for (const child of node.children) {
    if (child.field === 'name') out.push(child.children[0] ?? child);
    else if (child.field === 'argument') out.push(child);
  }
  return out;
}

function simpleCommand(node: ShellSyntaxNode, state: WalkState): void {
  const { analysis } = state;
  // Substitutions and expansions anywhere in the command (its name, arguments, assignments, redirections) run or evaluate too.
  for (const child of node.children) walk(child, state);
  const words = commandWords(node);
  if (words.length === 0) return;
  const values = unwrap(words.map(wordValue));
  if (values === null) {
    analysis.undecidable.push(`a wrapper's command is built from expansions: ${node.text}`);
    return;
  }
  if (values.length === 0) return;
  const [rawName = '', ...args] = values;
  if (rawName.includes(DYNAMIC)) {
    analysis.undecidable.push(`the command name is built from expansions: ${node.text}`);
    return;
  }
  const name = baseName(rawName);
  analysis.commands.push({ name, args });
  if (SHELLS.has(name)) {
    const script = shellScript(name === 'busybox' ? args.slice(1) : args);
    if (script.kind === 'text') {
      if (script.text.includes(DYNAMIC)) analysis.undecidable.push(`${name} -c runs a string built from expansions`);
      else state.nested.push(script.text);
    } else if (script.kind === 'file') analysis.undecidable.push(`${name} runs a script file whose commands are not checked`);
    // Its script arrives on standard input (a pipe from base64 -d or curl, a here-string), unseen by the rules.
    else analysis.undecidable.push(`${name} reads its commands from standard input`);
  } else if (name === 'eval') {
    const text = args.join(' ');
    if (text.includes(DYNAMIC)) analysis.undecidable.push('eval runs a string built from expansions');
    else state.nested.push(text);
  } else if (name === 'source' || name === '.') {
    analysis.undecidable.push(`${name} runs a file whose commands are not checked`);
  } else if (name === 'trap' && args[0] !== undefined && !args[0].startsWith('-')) {
    if (args[0].includes(DYNAMIC)) analysis.undecidable.push('trap installs a command built from expansions');
    else state.nested.push(args[0]);
  } else if (name === 'find') {
    findExec(args, analysis);
  }
}

/** `find … -exec rm -rf {} ;`: the words after -exec (up to `;` or `+`) are a command of their own. */
function findExec(args: string[], analysis: BashAnalysis): void {
  for (let index = 0; index < args.length; index += 1) {
    if (!['-exec', '-execdir', '-ok', '-okdir'].includes(args[index]!)) continue;
    const end = args.findIndex((word, at) => at > index && (word === ';' || word === '+'));
    const inner = unwrap(args.slice(index + 1, end === -1 ? undefined : end));
    if (inner === null || inner.length === 0 || inner[0]!.includes(DYNAMIC)) analysis.undecidable.push('find -exec runs a command built from expansions');
    else analysis.commands.push({ name: baseName(inner[0]!), args: inner.slice(1) });
    if (end === -1) return;
    index = end;
  }
}

/** What a shell invocation runs: a `-c` string, a script file, or its standard input. */
function shellScript(args: string[]): { kind: 'text'; text: string } | { kind: 'file' } | { kind: 'stdin' } {
  for (let index = 0; index < args.length; index += 1) {
    const word = args[index]!;
    if (word === '--' || word === '-') return index + 1 < args.length && word === '--' ? { kind: 'file' } : { kind: 'stdin' };
    if (/^-[A-Za-z]*c[A-Za-z]*$/.test(word)) return { kind: 'text', text: args[index + 1] ?? '' };
    if (word === '-o' || word === '+o' || word === '-O' || word === '+O' || word === '--rcfile' || word === '--init-file') {
      index += 1;
      continue;
    }
    if (/^[-+]/.test(word)) continue;
    return { kind: 'file' };
  }
  return { kind: 'stdin' };
}

/**
 * The command a wrapper runs: `sudo -u x nice -n 5 rm …` → `rm …`. Null when the wrapped command
 * cannot be known (a dynamic option, `env -S`). Leading `NAME=value` words of env are skipped.
 */
function unwrap(words: string[]): string[] | null {
  let rest = words;
  for (let guard = 0; guard < 16 && rest.length > 0; guard += 1) {
    const name = baseName(rest[0]!);
    const wrapper = WRAPPERS[name];
    if (!wrapper) return rest;
    let index = 1;
    let operands = wrapper.operands ?? 0;
    while (index < rest.length) {
      const word = rest[index]!;
      if (word.includes(DYNAMIC) && (word.startsWith('-') || operands > 0)) return null;
      if (word === '--') {
        index += 1;
        break;
      }
      if (name === 'env' && (word === '-S' || word.startsWith('--split-string') || /^-[a-zA-Z]*S/.test(word))) return null;
      if (word.startsWith('-') && word.length > 1) {
        const option = word.split('=')[0]!;
        index += wrapper.valued.includes(option) && !word.includes('=') ? 2 : 1;
        continue;
      }
      if (name === 'env' && /^[A-Za-z_][A-Za-z0-9_]*=/.test(word)) {
        index += 1;
        continue;
      }
      if (operands > 0) {
        operands -= 1;
        index += 1;
        continue;
      }
      break;
    }
    const inner = rest.slice(index);
    // xargs runs `echo` by default, and appends what it reads as arguments no rule saw.
    if (wrapper.appendsInput) return inner.length === 0 ? ['echo', DYNAMIC] : [...inner, DYNAMIC];
    // `command -v x`, `exec` alone, `env` alone: nothing more to unwrap, the wrapper itself is the command.
    if (inner.length === 0) return rest;
    rest = inner;
  }
  return rest;
}

/** `/usr/bin/rm` → `rm`. */
function baseName(word: string): string {
  const slash = word.lastIndexOf('/');
  return slash === -1 || slash === word.length - 1 ? word : word.slice(slash + 1);
}

/** A word's value after quote removal, each expansion in it DYNAMIC. */
export function wordValue(node: ShellSyntaxNode): string {
  switch (node.type) {
    case 'word':
    case 'command_name':
      if (node.children.length > 0) return node.children.map(wordValue).join('');
      return unquotedWord(node.text);
    case 'number':
    case 'string_content':
    case 'heredoc_content':
      return node.type === 'string_content' ? unescapeDoubleQuoted(node.text) : node.text;
    case 'raw_string':
      return node.text.slice(1, -1);
    case 'ansi_c_string':
      return decodeAnsiC(node.text.slice(2, -1));
    case 'string':
    case 'translated_string':
      return node.children.map(wordValue).join('');
    case 'concatenation':
      return node.children.map(wordValue).join('');
    default:
      return DYNAMIC;
  }
}

/** An unquoted word: backslashes quote the next character; a glob or brace pattern makes it dynamic. */
function unquotedWord(text: string): string {
  let out = '';
  for (let index = 0; index < text.length; index += 1) {
    const char = text[index]!;
    if (char === '\\') {
      index += 1;
      if (text[index] !== '\n' && index < text.length) out += text[index];
      continue;
    }
    if (char === '?' || char === '[' || (char === '*' && text.length > 1)) return DYNAMIC;
    if (char === '{' && /\{[^}]*(,|\.\.)[^}]*\}/.test(text.slice(index))) return DYNAMIC;
    if (char === '~' && index === 0) return DYNAMIC + text.slice(1);
    out += char;
  }
  return out;
}

function unescapeDoubleQuoted(text: string): string {
  return text.replace(/\\([$`"\\\n])/g, (_, char: string) => (char === '\n' ? '' : char));
}

const ANSI_ESCAPES: Record<string, string> = { a: '\x07', b: '\b', e: '\x1b', E: '\x1b', f: '\f', n: '\n', r: '\r', t: '\t', v: '\v', '\\': '\\', "'": "'", '"': '"', '?': '?' };

/** `$'…'`: its backslash escapes decoded, as bash does. */
function decodeAnsiC(body: string): string {
  return body.replace(/\\(x[0-9a-fA-F]{1,2}|u[0-9a-fA-F]{1,4}|U[0-9a-fA-F]{1,8}|[0-7]{1,3}|c.|.)/gs, (whole, escape: string) => {
    const head = escape[0]!;
    if (head === 'x' || head === 'u' || head === 'U') return String.fromCodePoint(Number.parseInt(escape.slice(1), 16));
    if (/[0-7]/.test(head)) return String.fromCharCode(Number.parseInt(escape, 8) & 0xff);
    if (head === 'c') return String.fromCharCode(escape.charCodeAt(1) & 0x1f);
    return ANSI_ESCAPES[head] ?? whole;
  });
}
