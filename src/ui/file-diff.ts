/** Lines of a file edit as a diff: what `file_editor` replaced, inserted or created. */
export interface DiffLine {
  sign: '+' | '-' | ' ' | '@';
  text: string;
}

function lines(text: unknown): string[] {
  return typeof text === 'string' ? text.replace(/\n$/, '').split('\n') : [];
}

/** The diff an edit makes, from the action's arguments; null for commands that do not edit. */
export function editDiff(args: Record<string, unknown>): DiffLine[] | null {
  switch (args.command) {
    case 'create':
      return lines(args.file_text).map((text) => ({ sign: '+', text }));
    case 'insert':
      return [{ sign: '@', text: `after line ${String(args.insert_line ?? 0)}` }, ...lines(args.new_str).map((text) => ({ sign: '+' as const, text }))];
    case 'str_replace':
      return replaceDiff(lines(args.old_str), lines(args.new_str));
    default:
      return null;
  }
}

/** Old and new text with their common leading and trailing lines shown once, as context. */
function replaceDiff(before: string[], after: string[]): DiffLine[] {
  let head = 0;
  while (head < before.length && head < after.length && before[head] === after[head]) head += 1;
  let tail = 0;
  while (tail < before.length - head && tail < after.length - head && before[before.length - 1 - tail] === after[after.length - 1 - tail]) tail += 1;
  return [
    ...before.slice(0, head).map((text) => ({ sign: ' ' as const, text })),
    ...before.slice(head, before.length - tail).map((text) => ({ sign: '-' as const, text })),
    ...after.slice(head, after.length - tail).map((text) => ({ sign: '+' as const, text })),
    ...after.slice(after.length - tail).map((text) => ({ sign: ' ' as const, text })),
  ];
}

/** A unified diff's text (from /changes) as lines. */
export function unifiedLines(diff: string): DiffLine[] {
  return diff.split('\n').map((line) => {
    const first = line[0];
    if (line.startsWith('@@')) return { sign: '@', text: line };
    if (first === '+' || first === '-') return { sign: first, text: line.slice(1) };
    return { sign: ' ', text: line.slice(1) };
  });
}
