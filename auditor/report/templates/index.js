(function () {
  "use strict";
  var table = document.getElementById("audits");
  if (!table) { return; }
  var body = table.tBodies[0];
  var rows = Array.prototype.slice.call(body.rows);
  var haystack = rows.map(function (r) { return r.textContent.toLowerCase(); });
  var query = document.getElementById("filter");
  var verdict = document.getElementById("verdict-filter");
  var shown = document.getElementById("shown");
  function apply() {
    var q = query.value.toLowerCase(), v = verdict.value, n = 0;
    rows.forEach(function (r, i) {
      var show = (!q || haystack[i].indexOf(q) >= 0) && (!v || r.getAttribute("data-verdict") === v);
      r.hidden = !show;
      if (show) { n += 1; }
    });
    shown.textContent = String(n);
  }
  query.addEventListener("input", apply);
  verdict.addEventListener("change", apply);
  var heads = table.tHead.rows[0].cells;
  Array.prototype.forEach.call(heads, function (th, col) {
    if (!th.hasAttribute("data-sort")) { return; }
    th.addEventListener("click", function () {
      var dir = th.getAttribute("aria-sort") === "ascending" ? -1 : 1;
      Array.prototype.forEach.call(heads, function (h) { h.removeAttribute("aria-sort"); });
      th.setAttribute("aria-sort", dir === 1 ? "ascending" : "descending");
      var numeric = th.getAttribute("data-sort") === "number";
      var keyed = rows.map(function (r, i) {
        var cell = r.cells[col], key = cell.getAttribute("data-key");
        if (key === null) { key = cell.textContent; }
        if (numeric) { key = parseFloat(key); if (isNaN(key)) { key = Infinity; } }
        return { row: r, key: key, i: i };
      });
      keyed.sort(function (a, b) {
        if (a.key < b.key) { return -dir; }
        if (a.key > b.key) { return dir; }
        return a.i - b.i;
      });
      var frag = document.createDocumentFragment();
      rows = keyed.map(function (k) { frag.appendChild(k.row); return k.row; });
      haystack = rows.map(function (r) { return r.textContent.toLowerCase(); });
      body.appendChild(frag);
    });
  });
})();
