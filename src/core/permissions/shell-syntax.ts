/**
 * A bash syntax tree as the permission rules read it: each node's grammar type, its source text,
 * the field it fills in its parent (`name`, `argument`, `body`...), and its named children. The
 * parser behind it is an adapter (adapters/shell-syntax), loaded on first use.
 */
export interface ShellSyntaxNode {
  type: string;
  text: string;
  field: string | null;
  children: ShellSyntaxNode[];
}

/** A parse: `complete` is false when the parser met a syntax error or the input was cut (too long, too deep). */
export interface ShellSyntaxTree {
  root: ShellSyntaxNode;
  complete: boolean;
}

export interface ShellParser {
  parse(source: string): Promise<ShellSyntaxTree>;
}
