import { describe, expect, it } from 'vitest';
import { isReportName, renderReport, slugOf } from './report-files.ts';

describe('report files', () => {
  it('names a report after its title', () => {
    expect(slugOf('Q3 Summary: Revenue & Costs')).toBe('q3-summary-revenue-costs');
    expect(slugOf('Résumé — été')).toBe('resume-ete');
    expect(slugOf('!!!')).toBe('report');
    expect(slugOf('a'.repeat(200))).toHaveLength(80);
  });

  it('accepts only plain .md and .html names', () => {
    expect(isReportName('q3.md')).toBe(true);
    expect(isReportName('q3-2.html')).toBe(true);
    for (const name of ['q3.txt', '.q3.md', '../q3.md', 'a/b.md', 'q3.md\0', 'q3.MD']) {
      expect(isReportName(name), name).toBe(false);
    }
  });

  it('puts the title over Markdown, and wraps HTML in a document with the title escaped', () => {
    expect(renderReport('Title', 'Body', 'markdown')).toBe('# Title\n\nBody\n');
    expect(renderReport('Title', '# Own heading\n', 'markdown')).toBe('# Own heading\n');
    const html = renderReport('<b>"T"</b>', '<p>x</p>', 'html');
    expect(html).toContain('<title>&#60;b&#62;&#34;T&#34;&#60;/b&#62;</title>');
    expect(html).toContain('<meta charset="utf-8">');
    expect(html).toContain('\n<p>x</p>\n');
    expect(renderReport('T', '<!DOCTYPE html><html></html>', 'html')).toBe('<!DOCTYPE html><html></html>');
  });

  it('ends Markdown with one newline in time linear in the content', () => {
    expect(renderReport('T', 'Body\n\n\n', 'markdown')).toBe('# T\n\nBody\n');
    // A long run of newlines that does not end the content: a backtracking regex (/\n*$/) needs over 30 s for this,
    // a scan about a millisecond. The bound only separates the two (a test timeout cannot stop synchronous code).
    const content = `${'\n'.repeat(200_000)}x`;
    const started = performance.now();
    expect(renderReport('T', content, 'markdown')).toBe(`# T\n\n${content}\n`);
    expect(performance.now() - started).toBeLessThan(10_000);
  });
});
