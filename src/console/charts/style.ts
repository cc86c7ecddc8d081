/**
 * The styles of the overview's charts and rates, added to the console's one
 * style block (../layout.tsx): the panels' grid — three columns of the nine
 * at the console's full width, down to one on a phone —, the numbers' table,
 * whose headings break anywhere so that ten columns fit a phone without a
 * scroll, and the marks of a rate near or over a limit.
 */
export const CHART_CSS = `
.charts{display:grid;grid-template-columns:repeat(auto-fill,minmax(20rem,1fr));gap:.5rem 1rem;margin:.5rem 0}
.chart{margin:0;border:1px solid #ddd;border-radius:6px;padding:.35rem .5rem}
.chart figcaption{font-size:.85rem;display:flex;gap:.35rem;align-items:center}
.chart svg{display:block;width:100%;height:auto}
.chart svg.swatch{width:.7rem;height:.7rem;flex:none}
.chart-key{font-size:.85rem;color:#444;margin:.25rem 0}
.activity details,.rates .limits{margin:.5rem 0}
.activity details table{font-size:.8rem}
.activity details caption{text-align:left;padding:.25rem 0}
.activity details th,.activity details td{padding:.25rem .3rem}
.activity details thead th{overflow-wrap:anywhere}
.activity tr.total{font-weight:600}
.level{padding:0 .25rem;border-radius:3px}
.level.near{background:#fff3cd;outline:1px solid #b38600}
.level.over{background:#fdecea;outline:1px solid #c62828}
.limits q{font-style:italic}
`
