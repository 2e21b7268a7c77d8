/** The longest title taken from a message; longer first lines are cut at a word, with an ellipsis. */
const MAX_TITLE = 80;

/**
 * The title an untitled conversation takes from its first user message (as stored, so with its
 * secrets masked): the first line with text, its runs of white space folded; null when the message
 * has no text (images only).
 */
export function titleFromMessage(content: string): string | null {
  const line = content
    .split('\n')
    .map((text) => text.replace(/\s+/g, ' ').trim())
    .find((text) => text !== '');
  if (line === undefined) return null;
  if (line.length <= MAX_TITLE) return line;
  const cut = line.slice(0, MAX_TITLE - 1);
  const space = cut.lastIndexOf(' ');
  return `${(space > MAX_TITLE / 2 ? cut.slice(0, space) : cut).trimEnd()}…`;
}
