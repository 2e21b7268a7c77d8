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

/**
 * `<secret:NAME>`, the server's mask for a secret's value, is a token, not an autolink to a
 * `secret:` URL: this rule takes it before markdown-it's autolink rule sees it.
 */
const SECRET_MASK = /<secret:([A-Za-z_][A-Za-z0-9_]*)>/y;
md.inline.ruler.before('autolink', 'secret_mask', (state, silent) => {
  if (state.src.charCodeAt(state.pos) !== 0x3c /* < */) return false;
  SECRET_MASK.lastIndex = state.pos;
  const match = SECRET_MASK.exec(state.src);
  if (!match) return false;
  if (!silent) state.push('secret_mask', '', 0).content = match[1]!;
  state.pos += match[0].length;
  return true;
});
md.renderer.rules.secret_mask = (tokens, index) =>
  `<span class="secret-mask" title="A secret's value, masked by the server">&lt;secret:${md.utils.escapeHtml(tokens[index]!.content)}&gt;</span>`;

export function renderMarkdown(text: string): string {
  return md.render(text);
}
