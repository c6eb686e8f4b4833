// Optional progressive enhancement for the changeset dashboard: keeps
// relative times fresh and stops a form from being sent twice. Every page
// works without it.
(function () {
  "use strict";
  function rel(iso) {
    var t = Date.parse(iso);
    if (isNaN(t)) return null;
    var d = (Date.now() - t) / 1000, ago = d >= 0, s;
    d = Math.abs(d);
    if (d < 45) return ago ? "just now" : "in a few seconds";
    if (d < 90) s = "1 min";
    else if (d < 3600) s = Math.round(d / 60) + " min";
    else if (d < 36 * 3600) s = Math.round(d / 3600) + " h";
    else if (d < 45 * 86400) s = Math.round(d / 86400) + " days";
    else return null;
    return ago ? s + " ago" : "in " + s;
  }
  // Each time reads "<absolute> (<relative>)"; only the relative part
  // (a span with data-rel) is refreshed.
  function refresh() {
    document.querySelectorAll("[data-rel]").forEach(function (el) {
      var r = rel(el.getAttribute("data-rel"));
      if (r) el.textContent = "(" + r + ")";
    });
  }
  document.addEventListener("submit", function (ev) {
    var form = ev.target;
    if (form.dataset.sent) { ev.preventDefault(); return; }
    form.dataset.sent = "1";
    form.querySelectorAll("button[type=submit]").forEach(function (b) { b.disabled = true; });
  });
  // A page restored from the back-forward cache may hold a sent form.
  window.addEventListener("pageshow", function () {
    document.querySelectorAll("form[data-sent]").forEach(function (f) {
      delete f.dataset.sent;
      f.querySelectorAll("button[type=submit]").forEach(function (b) { b.disabled = false; });
    });
  });
  setInterval(refresh, 30000);
})();
