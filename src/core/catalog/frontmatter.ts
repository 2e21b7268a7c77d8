/** The YAML parser loads at the first file with a frontmatter, not at start-up. */
let yaml: Promise<typeof import('yaml')> | undefined;

/** A Markdown file split into its YAML frontmatter (`---` … `---` at the top) and its body. */
export interface Frontmatter {
  data: Record<string, unknown>;
  body: string;
}

/**
 * Splits and parses the frontmatter of a SKILL.md, a command or an agent file. No frontmatter
 * gives `{}` and the whole text as body; YAML that does not parse, or is not a mapping, throws
 * an Error whose message says where (it is shown in GET /skills, never fails a run).
 */
export async function parseFrontmatter(text: string): Promise<Frontmatter> {
  const source = text.startsWith('\uFEFF') ? text.slice(1) : text;
  const open = /^---[ \t]*\r?\n/.exec(source);
  if (!open) return { data: {}, body: source };
  const rest = source.slice(open[0].length);
  const close = /^---[ \t]*(?:\r?\n|$)/m.exec(rest);
  if (!close) throw new Error('the frontmatter opened with `---` is never closed by a `---` line');
  const { parseDocument } = await (yaml ??= import('yaml'));
  const document = parseDocument(rest.slice(0, close.index), { uniqueKeys: true, prettyErrors: true });
  if (document.errors.length > 0) throw new Error(`invalid YAML frontmatter: ${document.errors[0]!.message.split('\n')[0]}`);
  const data: unknown = document.toJS({ maxAliasCount: 50 });
  if (data === null || data === undefined) return { data: {}, body: rest.slice(close.index + close[0].length) };
  if (typeof data !== 'object' || Array.isArray(data)) throw new Error('the frontmatter is not a mapping of `key: value` lines');
  return { data: data as Record<string, unknown>, body: rest.slice(close.index + close[0].length) };
}

/** A frontmatter field as text: strings as they are, numbers and booleans written out, anything else absent. */
export function textField(data: Record<string, unknown>, key: string): string | undefined {
  const value = data[key];
  if (typeof value === 'string') return value.trim();
  if (typeof value === 'number' || typeof value === 'boolean') return String(value);
  return undefined;
}

/** A list field given as a YAML list or as a comma-separated string (`tools: bash, glob`). */
export function listField(data: Record<string, unknown>, key: string): string[] | undefined {
  const value = data[key];
  if (Array.isArray(value)) return value.filter((item): item is string => typeof item === 'string').map((item) => item.trim()).filter(Boolean);
  if (typeof value === 'string') return value.split(',').map((item) => item.trim()).filter(Boolean);
  return undefined;
}
