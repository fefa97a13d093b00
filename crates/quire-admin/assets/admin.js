// The admin interface's only script, served from /admin/assets/admin.js so the
// Content-Security-Policy allows scripts from this origin alone (no inline code). Each part acts
// only on the page that has its element.
(function () {
  "use strict";

  // A secret shown once (a new key or webhook): a button that copies it.
  function copyButton() {
    var button = document.getElementById("copy");
    var secret = document.getElementById("secret");
    if (!button || !secret || !navigator.clipboard) return;
    button.hidden = false;
    button.addEventListener("click", function () {
      navigator.clipboard.writeText(secret.value).then(function () {
        document.getElementById("copied").textContent = "Copied.";
      });
    });
  }

  // A source's documents (table#documents[data-poll]): polls the statuses and progress once a
  // second while a document is still queued or processing.
  function pollDocuments() {
    var table = document.getElementById("documents");
    if (!table || !table.hasAttribute("data-poll") || !window.fetch) return;
    var url = table.getAttribute("data-statuses");
    function pending() {
      var cells = table.querySelectorAll("td.status");
      for (var i = 0; i < cells.length; i++) {
        var s = cells[i].textContent.split(/[:(]/)[0].trim();
        if (s === "queued" || s === "processing") return true;
      }
      return false;
    }
    function poll() {
      if (!pending()) return;
      fetch(url, {credentials: "same-origin"}).then(function (r) {
        return r.ok ? r.json() : null;
      }).then(function (all) {
        if (!all) return;
        Object.keys(all).forEach(function (id) {
          var row = table.querySelector('tr[data-document-id="' + id + '"]');
          if (!row) return;
          var cell = row.querySelector("td.status");
          var s = all[id];
          cell.textContent = s.error ? s.status + ": " + s.error
            : s.progress ? s.status + " (" + s.progress + ")" : s.status;
          cell.className = s.status === "failed" ? "status status-failed" : "status";
          var chunks = row.querySelector("td.chunks");
          if (chunks) chunks.textContent = s.chunkCount;
        });
        setTimeout(poll, 1000);
      }, function () { setTimeout(poll, 1000); });
    }
    setTimeout(poll, 1000);
  }

  // A document's page while it is queued or processing (#document-status[data-poll]): shows the
  // status and progress, and reloads the page once processing has ended (so the text appears).
  function pollDocument() {
    var cell = document.getElementById("document-status");
    if (!cell || !cell.hasAttribute("data-poll") || !window.fetch) return;
    var url = cell.getAttribute("data-statuses");
    var id = cell.getAttribute("data-document-id");
    function poll() {
      fetch(url, {credentials: "same-origin"}).then(function (r) {
        return r.ok ? r.json() : null;
      }).then(function (all) {
        var s = all && all[id];
        if (!s) { setTimeout(poll, 1000); return; }
        if (s.status !== "queued" && s.status !== "processing") { window.location.reload(); return; }
        cell.textContent = s.progress ? s.status + " (" + s.progress + ")" : s.status;
        setTimeout(poll, 1000);
      }, function () { setTimeout(poll, 1000); });
    }
    setTimeout(poll, 1000);
  }

  copyButton();
  pollDocuments();
  pollDocument();
})();
