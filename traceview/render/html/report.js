// traceview report: draw the charts and the kernel table from the data inline in the page.
// Text from the trace is only ever set with textContent or as an attribute value.
"use strict";
(function () {
  const charts = JSON.parse(document.getElementById("tv-charts").textContent);
  const data = JSON.parse(document.getElementById("tv-data").textContent);
  const config = { displaylogo: false, responsive: true, showLink: false, showSendToCloud: false };
  const drawing = [];
  document.querySelectorAll("[data-chart]").forEach(function (el) {
    const figure = charts[el.dataset.chart];
    if (figure) drawing.push(Plotly.newPlot(el, figure.data, figure.layout, config));
  });
  Promise.all(drawing).then(function () { document.body.dataset.drawn = "true"; });

  const COLUMNS = [
    ["#", "rank", 0], ["kernel", "short_name", -1], ["count", "count", 0],
    ["total (ms)", "total_us", 3, 1000], ["mean (µs)", "mean_us", 2], ["std (µs)", "std_us", 2],
    ["min (µs)", "min_us", 2], ["max (µs)", "max_us", 2], ["p50 (µs)", "p50_us", 2],
    ["p90 (µs)", "p90_us", 2], ["p99 (µs)", "p99_us", 2], ["% launches", "pct_launches", 2],
    ["% time", "pct_time", 2],
  ];
  // As traceview.render.escape.visible: control and format characters shown as escapes.
  const UNSAFE = /[\p{Cc}\p{Cf}\p{Cs}\p{Zl}\p{Zp}]/gu;
  const SHORT = { "\n": "\\n", "\r": "\\r", "\t": "\\t" };
  function visible(text) {
    return String(text).replace(UNSAFE, function (c) {
      if (SHORT[c]) return SHORT[c];
      const code = c.codePointAt(0);
      const hex = code.toString(16);
      if (code < 0x100) return "\\x" + hex.padStart(2, "0");
      return code < 0x10000 ? "\\u" + hex.padStart(4, "0") : "\\U" + hex.padStart(8, "0");
    });
  }
  const table = document.getElementById("kernel-table");
  if (!table) return;
  const rows = data.kernels.kernels.map(function (r, i) { return Object.assign({ rank: i + 1 }, r); });
  let sortKey = "rank", ascending = true, filter = "";
  const head = document.createElement("tr");
  COLUMNS.forEach(function (c) {
    const th = document.createElement("th");
    th.textContent = c[0];
    th.dataset.key = c[1];
    if (c[2] < 0) th.className = "name";
    th.addEventListener("click", function () {
      ascending = sortKey === c[1] ? !ascending : c[2] < 0 || c[1] === "rank";
      sortKey = c[1];
      draw();
    });
    head.appendChild(th);
  });
  const thead = document.createElement("thead");
  thead.appendChild(head);
  const tbody = document.createElement("tbody");
  table.append(thead, tbody);

  function matcher(text) {
    if (!text) return function () { return true; };
    const regex = /^\/(.+)\/$/.exec(text);
    if (regex) {
      try { const re = new RegExp(regex[1], "i"); return function (s) { return re.test(s); }; }
      catch (e) { /* not a regex: a substring */ }
    }
    const lower = text.toLowerCase();
    return function (s) { return s.toLowerCase().includes(lower); };
  }

  function draw() {
    const match = matcher(filter);
    const shown = rows.filter(function (r) { return match(r.name); });
    shown.sort(function (a, b) {
      const x = a[sortKey], y = b[sortKey];
      const order = typeof x === "string" ? x.localeCompare(y) : x - y;
      return ascending ? order : -order;
    });
    const fragment = document.createDocumentFragment();
    shown.forEach(function (r) {
      const tr = document.createElement("tr");
      COLUMNS.forEach(function (c) {
        const td = document.createElement("td");
        const v = r[c[1]];
        if (c[2] < 0) {
          td.className = "name";
          td.textContent = visible(r.variants > 1 ? v + " (" + r.variants + " variants)" : v);
          td.title = visible(r.name);
        } else {
          td.textContent = (v / (c[3] || 1)).toLocaleString("en-US",
            { minimumFractionDigits: c[2], maximumFractionDigits: c[2] });
        }
        tr.appendChild(td);
      });
      fragment.appendChild(tr);
    });
    tbody.replaceChildren(fragment);
    head.querySelectorAll("th").forEach(function (th) {
      if (th.dataset.key === sortKey) th.setAttribute("aria-sort", ascending ? "ascending" : "descending");
      else th.removeAttribute("aria-sort");
    });
    document.getElementById("kernel-count").textContent =
      shown.length + " of " + rows.length + " kernels shown";
  }
  document.getElementById("kernel-filter").addEventListener("input", function (e) {
    filter = e.target.value.trim();
    draw();
  });
  draw();
})();
