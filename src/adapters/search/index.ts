// The grep tool's searcher: ripgrep in the sandbox when the machine has it, else a JavaScript one.
export { detectRipgrep, selectTextSearcher, textSearcherOnFirstUse } from './ripgrep-searcher.js';
