/** A plain-text table: a header, a rule, and left-aligned columns as wide as their widest cell. */
export function renderTable(headers: readonly string[], rows: readonly (readonly unknown[])[]): string {
  const cells = rows.map((row) => row.map((cell) => (cell === null || cell === undefined ? '' : String(cell))))
  const widths = headers.map((header, index) => Math.max(header.length, ...cells.map((row) => row[index]?.length ?? 0)))
  const line = (row: readonly string[]) =>
    row
      .map((cell, index) => cell.padEnd(widths[index] ?? 0))
      .join('  ')
      .trimEnd()
  return [line(headers), line(widths.map((width) => '-'.repeat(width))), ...cells.map(line)].join('\n')
}
