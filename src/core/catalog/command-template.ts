/**
 * A slash command's template with its arguments filled in, as Claude Code does: `$ARGUMENTS` is
 * the whole argument text, `$1`, `$2`… its words (a "quoted phrase" counts as one word), a
 * missing one is empty. A template that uses none of them gets the arguments appended.
 */
export function fillCommandTemplate(template: string, args: string): string {
  const words = splitWords(args);
  let used = false;
  const filled = template.replace(/\$ARGUMENTS|\$(\d+)/g, (match, index: string | undefined) => {
    used = true;
    if (index === undefined) return args;
    return words[Number(index) - 1] ?? '';
  });
  if (used || args.trim() === '') return filled;
  return `${filled}\n\nARGUMENTS: ${args}`;
}

function splitWords(text: string): string[] {
  const words: string[] = [];
  for (const match of text.matchAll(/"([^"]*)"|'([^']*)'|(\S+)/g)) words.push(match[1] ?? match[2] ?? match[3] ?? '');
  return words;
}
