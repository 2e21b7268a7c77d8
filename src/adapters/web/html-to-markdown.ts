import TurndownService from 'turndown';

/**
 * HTML to readable Markdown with turndown (pure JavaScript, its DOM is domino's): what a model
 * reads best. Scripts, styles, forms and embedded objects go; headings, lists, links, code and
 * emphasis stay.
 */
const service = new TurndownService({ headingStyle: 'atx', codeBlockStyle: 'fenced', bulletListMarker: '-', emDelimiter: '*' });
service.remove(['script', 'style', 'noscript', 'template', 'iframe', 'svg', 'canvas', 'object', 'embed', 'head', 'title', 'meta', 'link', 'nav', 'form', 'button', 'select', 'input', 'textarea']);

/** Images keep their alt text only: data URLs and tracking pixels are noise to a model. */
service.addRule('imageAlt', {
  filter: 'img',
  replacement: (_content, node) => {
    const alt = (node as { getAttribute(name: string): string | null }).getAttribute('alt')?.trim();
    return alt ? `[image: ${alt}]` : '';
  },
});

/** List items with one space after the marker (turndown's default pads to four columns). */
service.addRule('compactListItem', {
  filter: 'li',
  replacement: (content, node) => {
    const parent = node.parentNode as { nodeName: string; getAttribute(name: string): string | null; children: ArrayLike<unknown> } | null;
    let prefix = '- ';
    if (parent?.nodeName === 'OL') {
      const start = Number(parent.getAttribute('start') ?? 1);
      prefix = `${start + Array.prototype.indexOf.call(parent.children, node)}. `;
    }
    const body = content.replace(/^\n+/, '').replace(/\n+$/, '\n').replace(/\n/gm, `\n${' '.repeat(prefix.length)}`);
    return prefix + body + (node.nextSibling && !/\n$/.test(body) ? '\n' : '');
  },
});

export function htmlToMarkdown(html: string): { markdown: string; title: string | null } {
  const titleMatch = /<title[^>]*>([\s\S]*?)<\/title>/i.exec(html);
  // The title's entities are decoded by the same parser.
  const title = titleMatch?.[1]?.trim() ? service.turndown(`<p>${titleMatch[1]}</p>`).replace(/\\([\\`*_[\]#+\-.!>~|])/g, '$1').trim() : null;
  const markdown = service.turndown(html).replace(/\n{3,}/g, '\n\n').trim();
  return { markdown, title: title || null };
}
