import { DYNAMIC, type SimpleCommand } from './bash-commands.js';

/**
 * A bash rule's pattern (`rm -rf*`, `git push*`, `npm run test:*`) read as a command: its name
 * (a glob), the options it names, and a glob over the other words. Options are compared as a set,
 * clusters split and long forms mapped to short ones where the command defines both, so `rm -rf`,
 * `rm -fr`, `rm -r -f`, `rm d -rf` and `rm --recursive --force` are one command to the rule.
 */
export interface CommandPattern {
  name: RegExp;
  options: Set<string>;
  operands: RegExp;
  /** The pattern ends with `*`: more options and words may follow. */
  open: boolean;
  /** The pattern as plain text with `*` wildcards, matched against a command's words as written (the rule syntax before parsing). */
  literal: RegExp;
  /** Anything beyond the name: a command with a dynamic word might match. */
  constrained: boolean;
}

/** Long options that mean the same as a short one, per command (only where the command documents both). */
const SAME_OPTION: Record<string, Record<string, string>> = {
  rm: { '--recursive': '-r', '-R': '-r', '--force': '-f', '--dir': '-d' },
  cp: { '--recursive': '-r', '-R': '-r', '--force': '-f' },
  mv: { '--force': '-f' },
  chmod: { '--recursive': '-R' },
  chown: { '--recursive': '-R' },
  shred: { '--remove': '-u', '--force': '-f' },
  git: { '--force': '-f' },
};

export function parseCommandPattern(pattern: string): CommandPattern {
  // `npm run test:*` (Claude Code's prefix form) is `npm run test*`.
  const source = (pattern.endsWith(':*') ? `${pattern.slice(0, -2)}*` : pattern).trim();
  const words = source.split(/\s+/);
  const open = source.endsWith('*');
  let trailingStar = false;
  if (words.length > 1 && words.at(-1) === '*') {
    words.pop();
    trailingStar = true;
  } else if (words.length > 1 && /^-[^*]+\*$/.test(words.at(-1)!)) {
    words[words.length - 1] = words.at(-1)!.slice(0, -1);
    trailingStar = true;
  }
  const name = baseName(words[0]!.replace(/^\\/, ''));
  const { options, operands } = splitOptions(name, words.slice(1));
  const operandGlob = operands.join(' ') + (trailingStar ? (operands.length > 0 ? ' *' : '*') : '');
  return {
    name: wildcard(name),
    options: new Set(options),
    operands: wildcard(operandGlob),
    open,
    literal: wildcard(source),
    constrained: words.length > 1 || trailingStar,
  };
}

/** Does the pattern cover the command? `covers` for deny and ask (more options still match), `allows` for allow (only the options it names, unless open). */
export function commandMatches(pattern: CommandPattern, command: SimpleCommand, mode: 'covers' | 'allows'): boolean {
  if (!pattern.name.test(command.name)) return false;
  if (pattern.literal.test([command.name, ...command.args].join(' '))) return true;
  const { options, operands } = splitOptions(command.name, command.args);
  const present = new Set(options);
  for (const option of pattern.options) if (!present.has(option)) return false;
  if (mode === 'allows' && !pattern.open && present.size !== pattern.options.size) return false;
  return pattern.operands.test(operands.join(' '));
}

/** Could the command match once its expansions have values? (Its name matched and a word of it is dynamic.) */
export function commandMightMatch(pattern: CommandPattern, command: SimpleCommand): boolean {
  return pattern.constrained && pattern.name.test(command.name) && command.args.some((word) => word.includes(DYNAMIC));
}

/** Options (each short one of a cluster apart, long ones without their value) and the other words; `--` ends options. */
function splitOptions(name: string, words: readonly string[]): { options: string[]; operands: string[] } {
  const same = SAME_OPTION[name] ?? {};
  const options: string[] = [];
  const operands: string[] = [];
  let ended = false;
  for (const word of words) {
    if (ended || word.includes(DYNAMIC) || word === '-' || !word.startsWith('-')) {
      operands.push(word);
      continue;
    }
    if (word === '--') {
      ended = true;
      continue;
    }
    if (word.startsWith('--')) {
      const long = word.split('=')[0]!;
      options.push(same[long] ?? long);
      continue;
    }
    for (const letter of word.slice(1)) options.push(same[`-${letter}`] ?? `-${letter}`);
  }
  return { options, operands };
}

/** `*` matches any run of characters (never a dynamic value's stand-in unless it is `*`); everything else is literal. */
function wildcard(pattern: string): RegExp {
  const body = pattern
    .split('*')
    .map((part) => part.replace(/[.+?^${}()|[\]\\]/g, '\\$&'))
    .join('.*');
  return new RegExp(`^${body}$`, 's');
}

function baseName(word: string): string {
  const slash = word.lastIndexOf('/');
  return slash === -1 || slash === word.length - 1 ? word : word.slice(slash + 1);
}
