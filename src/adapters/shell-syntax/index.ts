// Bash syntax for the permission rules: a WebAssembly parser loaded on first use.
export { TreeSitterShellParser } from './tree-sitter-shell-parser.js';
