import type { BenchReport, BenchTable } from './benchmark.js';

/** A table as aligned plain text for the terminal. */
export function textTable(table: BenchTable): string {
  const all = [table.columns, ...table.rows];
  const widths = table.columns.map((_, column) => Math.max(...all.map((row) => (row[column] ?? '').length)));
  const line = (row: string[]) => row.map((cell, column) => (column === 0 ? cell.padEnd(widths[column]!) : cell.padStart(widths[column]!))).join('  ');
  const out = [line(table.columns), widths.map((width) => '-'.repeat(width)).join('  '), ...table.rows.map(line)];
  return `${table.caption ? `${table.caption}\n` : ''}${out.join('\n')}`;
}

export function markdownTable(table: BenchTable): string {
  const escape = (cell: string) => cell.replaceAll('|', '\\|');
  const out = [
    `| ${table.columns.map(escape).join(' | ')} |`,
    `| ${table.columns.map((_, column) => (column === 0 ? '---' : '---:')).join(' | ')} |`,
    ...table.rows.map((row) => `| ${row.map(escape).join(' | ')} |`),
  ];
  return `${table.caption ? `${table.caption}\n\n` : ''}${out.join('\n')}`;
}

/** A benchmark's report as printed when it finishes. */
export function reportText(report: BenchReport): string {
  const head = `${report.id} ${report.title} (${report.sizes}; ${report.seconds.toFixed(1)} s)`;
  if (report.skipped) return `${head}\n  skipped: ${report.skipped}\n`;
  const parts = [head, ...report.tables.map(textTable), ...report.notes.map((note) => `* ${note}`)];
  return `${parts.join('\n\n')}\n`;
}

export function reportMarkdown(report: BenchReport): string {
  const head = `## ${report.id} ${report.title}\n\n${report.sizes}; took ${report.seconds.toFixed(1)} s.`;
  if (report.skipped) return `${head}\n\nskipped: ${report.skipped}\n`;
  const notes = report.notes.length ? `\n\n${report.notes.map((note) => `- ${note}`).join('\n')}` : '';
  return `${head}\n\n${report.tables.map(markdownTable).join('\n\n')}${notes}\n`;
}
