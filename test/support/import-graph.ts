import fs from 'node:fs';
import path from 'node:path';
import ts from 'typescript';

/** One import of a source file: what it names, where that resolves (a file of src/, or null for a package), and whether it is types only. */
export interface ImportEdge {
  specifier: string;
  target: string | null;
  typeOnly: boolean;
  /** An `import()` call: loaded when first needed, not with the file. */
  dynamic: boolean;
}

/** Every .ts file under `dir` (paths relative to `root`) with its imports and re-exports, read with the TypeScript parser. */
export function importGraph(root: string, dir = 'src'): Map<string, ImportEdge[]> {
  const graph = new Map<string, ImportEdge[]>();
  const visit = (folder: string) => {
    for (const entry of fs.readdirSync(path.join(root, folder), { withFileTypes: true })) {
      const relative = path.join(folder, entry.name);
      if (entry.isDirectory()) visit(relative);
      else if (entry.name.endsWith('.ts') && !entry.name.endsWith('.d.ts')) graph.set(relative, importsOf(root, relative));
    }
  };
  visit(dir);
  return graph;
}

function importsOf(root: string, file: string): ImportEdge[] {
  const source = ts.createSourceFile(file, fs.readFileSync(path.join(root, file), 'utf8'), ts.ScriptTarget.ES2022, false);
  const edges: ImportEdge[] = [];
  const add = (specifier: string, typeOnly: boolean, dynamic = false) => {
    const target = specifier.startsWith('.') ? path.join(path.dirname(file), specifier).replace(/\.js$/, '.ts') : null;
    edges.push({ specifier, target, typeOnly, dynamic });
  };
  const visit = (node: ts.Node) => {
    if (ts.isImportDeclaration(node) && ts.isStringLiteral(node.moduleSpecifier)) {
      const clause = node.importClause;
      const allTypes = clause?.isTypeOnly || (clause?.namedBindings && ts.isNamedImports(clause.namedBindings) && !clause.name && clause.namedBindings.elements.length > 0 && clause.namedBindings.elements.every((element) => element.isTypeOnly));
      add(node.moduleSpecifier.text, Boolean(allTypes));
    } else if (ts.isExportDeclaration(node) && node.moduleSpecifier && ts.isStringLiteral(node.moduleSpecifier)) {
      add(node.moduleSpecifier.text, node.isTypeOnly);
    } else if (ts.isCallExpression(node) && node.expression.kind === ts.SyntaxKind.ImportKeyword && node.arguments[0] && ts.isStringLiteral(node.arguments[0])) {
      add(node.arguments[0].text, false, true);
    }
    ts.forEachChild(node, visit);
  };
  visit(source);
  return edges;
}

/** Import cycles among the files (each as the list of files around it), with or without type-only imports. */
export function findCycles(graph: Map<string, ImportEdge[]>, options: { includeTypeOnly: boolean }): string[][] {
  const cycles: string[][] = [];
  const state = new Map<string, 'visiting' | 'done'>();
  const stack: string[] = [];
  const visit = (file: string) => {
    state.set(file, 'visiting');
    stack.push(file);
    for (const edge of graph.get(file) ?? []) {
      if (!edge.target || !graph.has(edge.target) || (edge.typeOnly && !options.includeTypeOnly)) continue;
      const seen = state.get(edge.target);
      if (seen === 'visiting') cycles.push([...stack.slice(stack.indexOf(edge.target)), edge.target]);
      else if (!seen) visit(edge.target);
    }
    stack.pop();
    state.set(file, 'done');
  };
  for (const file of graph.keys()) if (!state.has(file)) visit(file);
  return cycles;
}
