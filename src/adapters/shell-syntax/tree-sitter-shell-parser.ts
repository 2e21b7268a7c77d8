import fs from 'node:fs';
import { createRequire } from 'node:module';
import { isSea } from 'node:sea';
import { readAssetBytes } from '../../assets.js';
import type { ShellParser, ShellSyntaxNode, ShellSyntaxTree } from '../../core/permissions/shell-syntax.js';

/** The two WebAssembly files: the tree-sitter runtime and the bash grammar (SEA assets under `tree-sitter/`). */
const RUNTIME_WASM = 'tree-sitter.wasm';
const BASH_WASM = 'tree-sitter-bash.wasm';
/** Longer commands are not parsed (they are reported incomplete): a rule check stays cheap whatever the agent sends. */
const MAX_SOURCE_CHARS = 64 * 1024;
/** Deeper trees are reported incomplete rather than walked (the walk is recursive). */
const MAX_DEPTH = 400;

interface TreeSitterNode {
  type: string;
  text: string;
  isNamed: boolean;
  isMissing: boolean;
  childCount: number;
  child(index: number): TreeSitterNode | null;
  fieldNameForChild(index: number): string | null;
}
interface TreeSitterParser {
  parse(source: string): { rootNode: TreeSitterNode & { hasError: boolean }; delete(): void } | null;
}
interface TreeSitterModule {
  Parser: { init(options: { wasmBinary: Uint8Array }): Promise<void>; new (): TreeSitterParser & { setLanguage(language: unknown): void } };
  Language: { load(bytes: Uint8Array): Promise<unknown> };
}

class TooDeep extends Error {}

/**
 * Bash parsed with tree-sitter's bash grammar, compiled to WebAssembly (no native addon), as VS
 * Code ships it. The runtime and grammar load on the first parse, never at server start; from
 * node_modules normally, from the executable's assets in the single executable.
 */
export class TreeSitterShellParser implements ShellParser {
  private parser: Promise<TreeSitterParser> | null = null;

  async parse(source: string): Promise<ShellSyntaxTree> {
    if (source.length > MAX_SOURCE_CHARS) return { root: { type: 'program', text: '', field: null, children: [] }, complete: false };
    const parser = await (this.parser ??= loadParser().catch((error: unknown) => {
      this.parser = null;
      throw error;
    }));
    const tree = parser.parse(source);
    if (!tree) return { root: { type: 'program', text: '', field: null, children: [] }, complete: false };
    try {
      return { root: convert(tree.rootNode, null, 0), complete: !tree.rootNode.hasError };
    } catch (error) {
      if (error instanceof TooDeep) return { root: { type: 'program', text: '', field: null, children: [] }, complete: false };
      throw error;
    } finally {
      tree.delete();
    }
  }
}

function convert(node: TreeSitterNode, field: string | null, depth: number): ShellSyntaxNode {
  if (depth > MAX_DEPTH) throw new TooDeep();
  const children: ShellSyntaxNode[] = [];
  for (let index = 0; index < node.childCount; index += 1) {
    const child = node.child(index);
    // Anonymous tokens (`$(`, `;`, `|`) carry nothing the rules need; a missing one is a syntax error, which hasError reports.
    if (child && child.isNamed) children.push(convert(child, node.fieldNameForChild(index), depth + 1));
  }
  return { type: node.type, text: node.text, field, children };
}

async function loadParser(): Promise<TreeSitterParser> {
  const loaded = (await import('@vscode/tree-sitter-wasm')) as unknown as TreeSitterModule & { default?: TreeSitterModule };
  const { Parser, Language } = loaded.default ?? loaded;
  await Parser.init({ wasmBinary: wasmBytes(RUNTIME_WASM) });
  const parser = new Parser();
  parser.setLanguage(await Language.load(wasmBytes(BASH_WASM)));
  return parser;
}

function wasmBytes(name: string): Uint8Array {
  if (isSea()) return new Uint8Array(readAssetBytes(`tree-sitter/${name}`));
  const require = createRequire(import.meta.url);
  return new Uint8Array(fs.readFileSync(require.resolve(`@vscode/tree-sitter-wasm/wasm/${name}`)));
}
