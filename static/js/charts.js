// Draws every element with data-figure from the JSON figure the server rendered beside it,
// gives each chart a CSV download of exactly the data it draws, and redraws on a filter change.
(function () {
  "use strict";

  // Per-point arrays a trace may carry, in the column order of the CSV.
  const COLUMNS = ["x", "y", "q1", "median", "q3", "lowerfence", "upperfence", "hovertext", "customdata"];

  // Labels arrive as plain text with <, > and & as entities (governance/lib/text.py: plain); the CSV holds the
  // characters themselves, and text a spreadsheet would run as a formula gets a leading apostrophe (csv_safe).
  function label(text) {
    return text.replace(/&lt;/g, "<").replace(/&gt;/g, ">").replace(/&amp;/g, "&");
  }

  // Chart times are UTC written for the axis ("2026-11-03 10:00"); the CSV holds them as ISO 8601 UTC.
  const AXIS_TIME = /^(\d{4}-\d{2}-\d{2}) (\d{2}:\d{2})(:\d{2})?$/;

  function cell(value) {
    if (value === null || value === undefined) return "";
    if (typeof value === "string" && AXIS_TIME.test(value)) {
      return value.replace(AXIS_TIME, (_, day, time, seconds) => day + "T" + time + (seconds || ":00") + "Z");
    }
    let text = Array.isArray(value) ? value.join(" | ") : String(value);
    if (typeof value === "string" || Array.isArray(value)) {
      text = label(text);
      if (/^[=+\-@\t\r]/.test(text)) text = "'" + text;
    }
    return /[",\n\r]/.test(text) ? '"' + text.replace(/"/g, '""') + '"' : text;
  }

  // One row per point: series, then the trace's per-point columns; a heatmap becomes long rows (y, x, z).
  function figureRows(data) {
    const header = ["series"];
    const rows = [];
    data.forEach((trace) => {
      if (trace.type === "heatmap") {
        ["y", "x", "z"].forEach((c) => header.includes(c) || header.push(c));
        trace.y.forEach((y, i) => trace.x.forEach((x, j) => {
          const z = trace.z[i][j];
          if (z !== null && z !== undefined) rows.push({ series: trace.name, y, x, z });
        }));
        return;
      }
      const columns = COLUMNS.filter((c) => Array.isArray(trace[c]));
      columns.forEach((c) => header.includes(c) || header.push(c));
      const length = Math.max(...columns.map((c) => trace[c].length));
      for (let i = 0; i < length; i++) {
        const row = { series: trace.name };
        columns.forEach((c) => (row[c] = trace[c][i]));
        rows.push(row);
      }
    });
    return { header, rows };
  }

  function figureCsv(data) {
    const { header, rows } = figureRows(data);
    return [header, ...rows.map((r) => header.map((c) => r[c]))].map((r) => r.map(cell).join(",")).join("\n") + "\n";
  }

  function download(el) {
    const blob = new Blob([figureCsv(el.data)], { type: "text/csv" });
    const link = document.createElement("a");
    link.href = URL.createObjectURL(blob);
    link.download = el.id + (window.location.search ? "-" + new URLSearchParams(window.location.search).toString().replace(/[^\w-]+/g, "_") : "") + ".csv";
    document.body.appendChild(link);
    link.click();
    link.remove();
    setTimeout(() => URL.revokeObjectURL(link.href), 1000);
  }

  // On a phone the toolbar would sit on the title: no toolbar there; elsewhere it shows on hover, and the
  // title sits at the left, away from it.
  const narrow = Boolean(window.matchMedia && window.matchMedia("(max-width: 700px)").matches);
  document.querySelectorAll("[data-figure]").forEach((el) => {
    const figure = JSON.parse(document.getElementById(el.dataset.figure).textContent);
    const config = {
      responsive: true, displaylogo: false, displayModeBar: narrow ? false : "hover",
      modeBarButtonsToRemove: ["select2d", "lasso2d", "autoScale2d", "toggleSpikelines"],
      toImageButtonOptions: { format: "png", filename: el.id },
    };
    const title = figure.layout && figure.layout.title;
    if (title && title.x === undefined) Object.assign(title, { x: 0.01, xanchor: "left" });
    Plotly.newPlot(el, figure.data, figure.layout, config).then(() => el.setAttribute("data-drawn", "true"));
  });

  // On a phone the long sections of the team page start folded (the table of contents opens them); a chart in a
  // section that opens is resized to the width it now has.
  if (narrow) {
    document.querySelectorAll("details[data-narrow=closed]").forEach((section) => section.removeAttribute("open"));
  }
  document.querySelectorAll("details.section").forEach((section) => section.addEventListener("toggle", () => {
    if (section.open && window.Plotly) section.querySelectorAll("[data-drawn]").forEach((el) => Plotly.Plots.resize(el));
  }));
  document.querySelectorAll(".toc a").forEach((link) => link.addEventListener("click", () => {
    const target = document.querySelector(link.getAttribute("href"));
    if (target && target.tagName === "DETAILS") target.open = true;
    const section = target && target.closest("details.section");
    if (section) section.open = true;
  }));

  document.querySelectorAll("[data-csv-for]").forEach((button) => {
    button.addEventListener("click", () => download(document.getElementById(button.dataset.csvFor)));
  });

  // A filter change is a plain GET: the new view is a link, and the server redraws with the new data.
  document.querySelectorAll("form[data-autosubmit]").forEach((form) => {
    form.querySelectorAll("select, input").forEach((input) => input.addEventListener("change", () => form.requestSubmit()));
  });

  // Auto-refresh (cluster page): a static timer, so the Content-Security-Policy needs no inline script.
  const refresh = document.querySelectorAll("[data-refresh-seconds]")[0];
  if (refresh) {
    const seconds = Math.max(30, parseInt(refresh.dataset.refreshSeconds, 10) || 0);
    setTimeout(() => window.location.reload(), seconds * 1000);
  }

  window.gpuGovernance = { figureCsv };
})();
