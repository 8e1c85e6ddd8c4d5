/**
 * A web page as a model should read it: its title, its main text as Markdown, and its links.
 *
 * Libraries, and why these: `@mozilla/readability` (Apache-2.0) is the extractor behind Firefox Reader View,
 * maintained by Mozilla and tuned on real pages for a decade; it finds the main content and drops navigation,
 * ads and boilerplate, which a plain HTML-to-text pass keeps. It needs a DOM: `linkedom` (ISC) is a small,
 * maintained, standards-shaped DOM for servers, far lighter than jsdom and without its resource loading (no
 * script ever runs, nothing is fetched). `turndown` (MIT, maintained) turns the extracted HTML into Markdown, which
 * keeps headings, lists, emphasis and inline links that plain text would lose. Pages where Readability finds no
 * article (a search form, an index) fall back to the whole body with scripts, styles and navigation chrome removed.
 * Runs only in the CPU pool's workers (cpu-jobs.ts), never on the event loop: Readability's cost grows
 * roughly with the cube of the nesting depth (2,000 nested `<div>`s: minutes), and Turndown recurses per level.
 */
import { Readability } from '@mozilla/readability';
import { parseHTML } from 'linkedom';
import TurndownService from 'turndown';

export interface PageLink {
  text: string;
  url: string;
}

export interface ReadablePage {
  title: string;
  /** The main text, as Markdown. */
  text: string;
  links: PageLink[];
}

const NOISE = 'script, style, noscript, template, svg, canvas, iframe, object, embed, form, nav, footer, header, aside';

function absolute(raw: string | null, base: string): string | null {
  if (raw === null || raw.trim() === '') return null;
  return URL.canParse(raw.trim(), base) ? new URL(raw.trim(), base).href : null;
}

const collapse = (text: string): string => text.replace(/\s+/g, ' ').trim();

/** Extracts the readable page from `html` fetched from `pageUrl` (relative links are resolved against it). */
export function readablePage(html: string, pageUrl: string, options: { maxLinks: number }): ReadablePage {
  // linkedom takes the first element of a fragment for the document element: give a fragment its document.
  const { document } = parseHTML(/<html[\s>]/i.test(html) ? html : `<!doctype html><html><body>${html}</body></html>`);
  const baseHref = document.querySelector('base[href]')?.getAttribute('href') ?? null;
  const base = absolute(baseHref, pageUrl) ?? pageUrl;

  // Links first (Readability rewrites the document), made absolute so that the Markdown's links work too.
  const links: PageLink[] = [];
  const seen = new Set<string>();
  for (const anchor of document.querySelectorAll('a[href]')) {
    const url = absolute(anchor.getAttribute('href'), base);
    if (url === null || !/^https?:/.test(url)) {
      anchor.removeAttribute('href');
      continue;
    }
    anchor.setAttribute('href', url);
    if (seen.has(url) || links.length >= options.maxLinks) continue;
    seen.add(url);
    links.push({ text: collapse(anchor.textContent ?? '') || url, url });
  }
  for (const image of document.querySelectorAll('img')) {
    const src = absolute(image.getAttribute('src'), base);
    // Inline data: images can be megabytes of base64; they say nothing to a reader.
    if (src === null || !/^https?:/.test(src)) image.remove();
    else image.setAttribute('src', src);
  }

  const title = collapse(document.title ?? '') || collapse(document.querySelector('h1')?.textContent ?? '');
  const turndown = new TurndownService({ headingStyle: 'atx', codeBlockStyle: 'fenced', bulletListMarker: '-' });
  const fallbackHtml = () => {
    for (const element of document.querySelectorAll(NOISE)) element.remove();
    return document.body?.innerHTML ?? '';
  };
  let article: ReturnType<Readability['parse']> = null;
  try {
    article = new Readability(document.cloneNode(true)).parse();
  } catch {
    article = null;
  }
  const content = article?.content ?? '';
  const markdown = turndown.turndown(content.trim() === '' ? fallbackHtml() : content);
  return {
    title: title || collapse(article?.title ?? ''),
    text: markdown.replace(/\n{3,}/g, '\n\n').trim(),
    links,
  };
}
