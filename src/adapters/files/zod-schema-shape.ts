/**
 * A zod schema's shape as text: every node's type, an object's field names in order, defaults,
 * enum values and literals; a node met again (a recursive schema) as its number. A field added,
 * removed, renamed or retyped, or a default changed, changes it: a cache of data parsed with the
 * schema compares it (record-snapshot.ts).
 */
interface ZodDef {
  type: string;
  shape?: Record<string, unknown>;
  options?: unknown[];
  items?: unknown[];
  values?: Set<unknown>;
  entries?: unknown;
  defaultValue?: unknown;
  [key: string]: unknown;
}

export function schemaShape(schema: unknown): string {
  const seen = new Map<unknown, number>();
  const out: string[] = [];
  const walk = (node: unknown): void => {
    const def = (node as { _zod?: { def?: ZodDef } } | null)?._zod?.def;
    if (!def) return void out.push('?');
    const known = seen.get(node);
    if (known !== undefined) return void out.push(`#${known}`);
    seen.set(node, seen.size);
    out.push(def.type);
    if (def.type === 'object' && def.shape) {
      out.push('{');
      for (const [key, value] of Object.entries(def.shape)) {
        out.push(key);
        walk(value);
      }
      out.push('}');
    }
    for (const key of ['innerType', 'element', 'valueType', 'keyType', 'in', 'out', 'left', 'right', 'rest']) if (def[key]) walk(def[key]);
    for (const list of [def.options, def.items]) {
      if (!Array.isArray(list)) continue;
      out.push('[');
      list.forEach(walk);
      out.push(']');
    }
    if ('defaultValue' in def) out.push(JSON.stringify(typeof def.defaultValue === 'function' ? null : def.defaultValue) ?? '');
    if (def.values) out.push(JSON.stringify([...def.values]));
    if (def.entries) out.push(JSON.stringify(def.entries));
  };
  walk(schema);
  return out.join(' ');
}
