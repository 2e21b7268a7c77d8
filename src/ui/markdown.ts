import MarkdownIt from 'markdown-it';

/**
 * Agent text as markdown, safely: markdown-it with `html: false` escapes any HTML in the text
 * instead of passing it through, and its link validation refuses `javascript:`, `vbscript:`,
 * `file:` and non-image `data:` URLs. Links open in a new tab without a referrer.
 */
const md = new MarkdownIt({ html: false, linkify: true, breaks: false });

const defaultLinkOpen = md.renderer.rules.link_open ?? ((tokens, index, options, _env, self) => self.renderToken(tokens, index, options));
md.renderer.rules.link_open = (tokens, index, options, env, self) => {
  const token = tokens[index]!;
  token.attrSet('target', '_blank');
  token.attrSet('rel', 'noopener noreferrer');
  return defaultLinkOpen(tokens, index, options, env, self);
};

export function renderMarkdown(text: string): string {
  return md.render(text);
}
