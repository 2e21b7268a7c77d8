import type TurndownService from 'turndown';

/** What the worker is asked: one page's HTML and the limits to hold it to. */
export interface HtmlJob {
  id: number;
  html: string;
  maxDepth: number;
  maxElements: number;
}

/** Its answer: the Markdown, or why there is none. `cut`: what was left out of a page over a limit. */
export type HtmlJobResult = { id: number; markdown: string; title: string | null; cut: string | null } | { id: number; error: string };

/** The libraries the worker converts with: turndown and the DOM it parses with (domino). */
export interface HtmlLibraries {
  TurndownService: typeof TurndownService;
  domino: { createDocument(html: string): any };
}

/**
 * The HTML worker's program (html-converter.ts starts it in a worker thread): HTML to readable
 * Markdown with turndown, within limits a hostile page cannot get past.
 *
 * It runs from its own text (`(<this function>)(require, libraries)`, evaluated in the worker),
 * or from the single executable's bundle of html-worker-entry.ts, so it uses nothing from outside
 * its body: `load` is the worker's `require`, `libraries` loads turndown and domino.
 *
 * domino's parser checks the open elements at every tag, so a page nested N deep costs N² before
 * turndown even starts, and turndown recurses once per level (a stack overflow past a thousand or
 * so). So the HTML is first scanned, in one pass that never recurses, for its nesting and element
 * count as a parser would build them, and cut where it goes past either; the parsed document is
 * then walked (again without recursion) and held to the limits exactly before turndown sees it.
 * Scripts, styles, forms and embedded objects go; headings, lists, links, code and emphasis stay.
 */
export function htmlWorkerMain(load: NodeJS.Require, libraries: () => HtmlLibraries): void {
  const { parentPort } = load('node:worker_threads') as typeof import('node:worker_threads');
  if (!parentPort) return;

  const VOID = new Set(['area', 'base', 'br', 'col', 'embed', 'hr', 'img', 'image', 'input', 'link', 'meta', 'source', 'track', 'wbr', 'param', 'keygen', 'frame', 'basefont', 'bgsound']);
  const RAW_TEXT = new Set(['script', 'style', 'textarea', 'title', 'xmp', 'iframe', 'noembed', 'noframes']);
  // Elements the parser makes once, whatever a page repeats: not counted as nesting.
  const IMPLIED = new Set(['html', 'head', 'body']);
  // A start tag of one of these closes an open <p> (when nothing but inline elements is above it).
  const CLOSES_P = new Set(['address', 'article', 'aside', 'blockquote', 'center', 'details', 'dialog', 'dir', 'div', 'dl', 'fieldset', 'figcaption', 'figure', 'footer', 'form', 'h1', 'h2', 'h3', 'h4', 'h5', 'h6', 'header', 'hgroup', 'hr', 'main', 'menu', 'nav', 'ol', 'p', 'pre', 'section', 'summary', 'table', 'ul', 'li', 'dd', 'dt', 'listing', 'plaintext']);
  // Where the search for an element to close implicitly stops (a list, a table and their cells).
  const SCOPE = new Set(['table', 'td', 'th', 'caption', 'button', 'object', 'marquee', 'applet', 'template', 'svg', 'math', 'ul', 'ol', 'tr', 'select']);
  // A start tag that closes an open element of these names, the nearest one inside the scope.
  const CLOSES: Record<string, string[]> = {
    li: ['li'],
    dt: ['dt', 'dd'],
    dd: ['dt', 'dd'],
    option: ['option'],
    optgroup: ['option', 'optgroup'],
    tr: ['tr', 'td', 'th'],
    td: ['td', 'th'],
    th: ['td', 'th'],
    thead: ['tbody', 'thead', 'tfoot', 'tr', 'td', 'th'],
    tbody: ['tbody', 'thead', 'tfoot', 'tr', 'td', 'th'],
    tfoot: ['tbody', 'thead', 'tfoot', 'tr', 'td', 'th'],
    a: ['a'],
    button: ['button'],
    nobr: ['nobr'],
    h1: ['h1', 'h2', 'h3', 'h4', 'h5', 'h6'],
    h2: ['h1', 'h2', 'h3', 'h4', 'h5', 'h6'],
    h3: ['h1', 'h2', 'h3', 'h4', 'h5', 'h6'],
    h4: ['h1', 'h2', 'h3', 'h4', 'h5', 'h6'],
    h5: ['h1', 'h2', 'h3', 'h4', 'h5', 'h6'],
    h6: ['h1', 'h2', 'h3', 'h4', 'h5', 'h6'],
  };

  /**
   * Where to cut `html` so that its nesting stays within `maxDepth` and its elements within
   * `maxElements`, as far as one pass over its tags can tell (end tags close what they name,
   * void elements and the parser's implied closes are followed); null: nowhere.
   */
  function scan(html: string, maxDepth: number, maxElements: number): { at: number; reason: 'depth' | 'elements' } | null {
    // ASCII letters only: a full toLowerCase can change the text's length (a dotted capital I becomes two), and so every index after it.
    const lower = html.replace(/[A-Z]+/g, (letters) => letters.toLowerCase());
    const stack: string[] = [];
    const open = new Map<string, number>();
    let foreign = 0;
    let elements = 0;
    const push = (name: string) => {
      stack.push(name);
      open.set(name, (open.get(name) ?? 0) + 1);
      if (name === 'svg' || name === 'math') foreign++;
    };
    const popTo = (index: number) => {
      while (stack.length > index) {
        const name = stack.pop()!;
        open.set(name, open.get(name)! - 1);
        if (name === 'svg' || name === 'math') foreign--;
      }
    };
    // The nearest open element named in `names`, above any scope boundary; -1: none.
    const nearest = (names: string[]) => {
      if (!names.some((name) => (open.get(name) ?? 0) > 0)) return -1;
      for (let index = stack.length - 1; index >= 0; index--) {
        const name = stack[index]!;
        if (names.includes(name)) return index;
        if (SCOPE.has(name)) return -1;
      }
      return -1;
    };
    let at = 0;
    const length = html.length;
    while (at < length) {
      const lt = html.indexOf('<', at);
      if (lt === -1 || lt + 1 >= length) return null;
      const next = html.charCodeAt(lt + 1);
      if (html.startsWith('<!--', lt)) {
        const end = html.indexOf('-->', lt + 4);
        if (end === -1) return null;
        at = end + 3;
        continue;
      }
      if (next === 33 /* ! */ || next === 63 /* ? */) {
        const end = html.indexOf('>', lt + 2);
        if (end === -1) return null;
        at = end + 1;
        continue;
      }
      const closing = next === 47; /* / */
      let nameStart = closing ? lt + 2 : lt + 1;
      const first = lower.charCodeAt(nameStart);
      if (!(first >= 97 && first <= 122)) {
        at = lt + 1;
        continue;
      }
      let nameEnd = nameStart;
      while (nameEnd < length && !/[\s/>]/.test(html[nameEnd]!)) nameEnd++;
      const name = lower.slice(nameStart, nameEnd);
      // The tag's end: quoted attribute values may hold '>'.
      let end = nameEnd;
      let afterEquals = false;
      for (; end < length; end++) {
        const char = html[end]!;
        if (char === '>') break;
        if (char === '=') afterEquals = true;
        else if (afterEquals && (char === '"' || char === "'")) {
          const close = html.indexOf(char, end + 1);
          if (close === -1) return null;
          end = close;
          afterEquals = false;
        } else if (!/\s/.test(char)) afterEquals = false;
      }
      if (end >= length) return null;
      const selfClosing = html[end - 1] === '/';
      at = end + 1;
      if (closing) {
        if ((open.get(name) ?? 0) > 0) popTo(stack.lastIndexOf(name));
        continue;
      }
      elements++;
      if (elements > maxElements) return { at: lt, reason: 'elements' };
      if (name === 'plaintext') return null;
      if (IMPLIED.has(name) || VOID.has(name) || (selfClosing && foreign > 0)) continue;
      if (CLOSES_P.has(name) && (open.get('p') ?? 0) > 0) {
        const p = nearest(['p']);
        if (p !== -1) popTo(p);
      }
      const closes = CLOSES[name];
      if (closes) {
        const index = nearest(closes);
        if (index !== -1) popTo(index);
      }
      push(name);
      if (stack.length > maxDepth) return { at: lt, reason: 'depth' };
      if (RAW_TEXT.has(name)) {
        const close = lower.indexOf(`</${name}`, at);
        if (close === -1) return null;
        at = close;
      }
    }
    return null;
  }

  /** Holds the parsed `root` to the limits exactly: what lies deeper, or past the last element allowed, is removed. */
  function prune(root: any, maxDepth: number, maxElements: number): 'depth' | 'elements' | null {
    let cut: 'depth' | 'elements' | null = null;
    let elements = 0;
    let depth = 1;
    let node = root.firstChild;
    while (node) {
      if (node.nodeType === 1) {
        elements++;
        if (elements > maxElements) {
          // This node and everything after it in document order.
          let current = node;
          while (current && current !== root) {
            const parent = current.parentNode;
            while (current.nextSibling) parent.removeChild(current.nextSibling);
            if (current === node) parent.removeChild(current);
            current = parent;
          }
          return 'elements';
        }
        if (depth >= maxDepth && node.firstElementChild) {
          while (node.firstChild) node.removeChild(node.firstChild);
          cut ??= 'depth';
        }
        if (node.firstChild) {
          node = node.firstChild;
          depth++;
          continue;
        }
      }
      while (node && node !== root && !node.nextSibling) {
        node = node.parentNode;
        depth--;
      }
      node = node === root ? null : node?.nextSibling;
    }
    return cut;
  }

  let converter: { service: TurndownService; domino: HtmlLibraries['domino'] } | undefined;
  function makeConverter() {
    const { TurndownService: Service, domino } = libraries();
    const service = new Service({ headingStyle: 'atx', codeBlockStyle: 'fenced', bulletListMarker: '-', emDelimiter: '*' });
    service.remove(['script', 'style', 'noscript', 'template', 'iframe', 'svg', 'canvas', 'object', 'embed', 'head', 'title', 'meta', 'link', 'nav', 'form', 'button', 'select', 'input', 'textarea'] as never);
    // Images keep their alt text only: data URLs and tracking pixels are noise to a model.
    service.addRule('imageAlt', {
      filter: 'img',
      replacement: (_content, node) => {
        const alt = (node as { getAttribute(name: string): string | null }).getAttribute('alt')?.trim();
        return alt ? `[image: ${alt}]` : '';
      },
    });
    // List items with one space after the marker (turndown's default pads to four columns).
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
    return { service, domino };
  }

  function convert(job: HtmlJob): HtmlJobResult {
    converter ??= makeConverter();
    const scanned = scan(job.html, job.maxDepth * 2, job.maxElements);
    const document = converter.domino.createDocument(scanned ? job.html.slice(0, scanned.at) : job.html);
    const root = document.body ?? document.documentElement;
    const pruned = root ? prune(root, job.maxDepth, job.maxElements) : null;
    const reason = scanned?.reason === 'elements' || pruned === 'elements' ? 'elements' : scanned || pruned ? 'depth' : null;
    const cut = reason === 'elements' ? `more than ${job.maxElements} elements; the rest is left out` : reason === 'depth' ? `nesting deeper than ${job.maxDepth}; what lies deeper is left out` : null;
    const markdown = root ? converter.service.turndown(root).replace(/\n{3,}/g, '\n\n').trim() : '';
    const title = String(document.title ?? '').trim();
    return { id: job.id, markdown, title: title || null, cut };
  }

  parentPort.on('message', (job: HtmlJob) => {
    let result: HtmlJobResult;
    try {
      result = convert(job);
    } catch (error) {
      result = { id: job.id, error: error instanceof Error ? error.message : String(error) };
    }
    parentPort.postMessage(result);
  });
}
