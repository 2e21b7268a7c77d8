// The web tools' outside: web_fetch over undici (HTML to markdown), web_search's providers.
export { UndiciWebFetcher } from './undici-web-fetcher.js';
export { ProviderWebSearcher } from './web-search-providers.js';
