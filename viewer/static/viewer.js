// flask-eval view: a little progressive enhancement (the pages work without it).
"use strict";
document.addEventListener("DOMContentLoaded", () => {
  // pickers submit on change
  for (const select of document.querySelectorAll("select.autosubmit")) {
    select.addEventListener("change", () => select.form.submit());
  }
  // heat cells: a colour from the score's place on the scale seen in the table
  for (const table of document.querySelectorAll("table.heatmap, table.matrix")) {
    const cells = [...table.querySelectorAll("td.heat")];
    const values = cells.map((c) => parseFloat(c.dataset.score)).filter((v) => !Number.isNaN(v));
    if (!values.length) continue;
    const lo = Math.min(...values), hi = Math.max(...values);
    for (const cell of cells) {
      const v = parseFloat(cell.dataset.score);
      if (Number.isNaN(v)) continue;
      const t = hi > lo ? (v - lo) / (hi - lo) : 0.5;
      cell.style.backgroundColor = `hsl(${Math.round(10 + 110 * t)}, 55%, ${Math.round(92 - 14 * t)}%)`;
    }
  }
});
