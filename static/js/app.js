// Countersign's only script. Kept in a static file so the CSP needs no 'unsafe-inline'.
// Progressive enhancement: every action also works as a plain link or form without it.
(function () {
  "use strict";

  function typing(target) {
    if (!target) return false;
    var tag = target.tagName;
    return tag === "INPUT" || tag === "TEXTAREA" || tag === "SELECT" || target.isContentEditable;
  }

  function rows() {
    return Array.prototype.slice.call(document.querySelectorAll("[data-queue] [data-row]"));
  }

  var current = -1;

  function select(index) {
    var all = rows();
    if (!all.length) return;
    index = Math.max(0, Math.min(all.length - 1, index));
    all.forEach(function (row, i) { row.classList.toggle("selected", i === index); });
    current = index;
    var link = all[index].querySelector("[data-open]");
    if (link) link.focus({ preventScroll: true });
    all[index].scrollIntoView({ block: "nearest" });
  }

  function click(selector) {
    var el = document.querySelector(selector);
    if (el) { el.click(); return true; }
    return false;
  }

  function toggleHelp() {
    var dialog = document.getElementById("shortcuts");
    if (!dialog) return;
    if (dialog.open) dialog.close(); else dialog.showModal();
  }

  document.addEventListener("keydown", function (event) {
    if (event.ctrlKey || event.metaKey || event.altKey || typing(event.target)) return;
    var dialog = document.getElementById("shortcuts");
    if (dialog && dialog.open && event.key !== "?") return;
    var handled = true;
    switch (event.key) {
      case "j": select(current + 1); break;
      case "k": select(current < 0 ? 0 : current - 1); break;
      case "o":
      case "Enter": {
        var all = rows();
        if (event.key === "Enter" && current < 0) { handled = false; break; }
        var row = all[current < 0 ? 0 : current];
        var link = row && row.querySelector("[data-open]");
        if (link) window.location.assign(link.href); else handled = false;
        break;
      }
      case "x": {
        var r = rows()[current];
        var box = r && r.querySelector("input[type=checkbox]");
        if (box) box.checked = !box.checked; else handled = false;
        break;
      }
      case "a": handled = click("[data-approve]"); break;
      case "n": handled = click("[data-approve-next]"); break;
      case "e": handled = click("[data-edit]"); break;
      case "r": {
        var reason = document.querySelector("[data-reject-reason]");
        if (reason) { reason.focus(); reason.scrollIntoView({ block: "center" }); } else handled = false;
        break;
      }
      case "u": handled = click("[data-back]"); break;
      case "?": toggleHelp(); break;
      default: handled = false;
    }
    if (handled) event.preventDefault();
  });

  document.addEventListener("click", function (event) {
    var target = event.target;
    if (target.closest && target.closest("[data-shortcuts]")) {
      toggleHelp();
      return;
    }
    if (target.matches && target.matches("[data-select-all]")) {
      document.querySelectorAll("[data-queue] input[name=item]").forEach(function (box) {
        box.checked = target.checked;
      });
    }
  });

  // The editor's HTML preview follows the textarea. The iframe is sandboxed without
  // allow-scripts, so whatever the HTML holds, nothing in it runs.
  document.addEventListener("input", function (event) {
    var field = event.target;
    if (!field.matches || !field.matches(".edit-form textarea[name=html]")) return;
    var preview = document.querySelector("[data-html-preview]");
    var empty = document.querySelector("[data-html-empty]");
    if (preview) preview.srcdoc = field.value;
    if (empty) empty.hidden = field.value.trim() !== "";
  });

  document.addEventListener("focusin", function (event) {
    if (event.target.classList && event.target.classList.contains("copy-field")) event.target.select();
  });

  // One approval per click: a double-click must not post twice (the server refuses the second,
  // but the person would see a confusing "already approved").
  document.addEventListener("submit", function (event) {
    var form = event.target;
    if (!form.matches("[data-approve-form], #bulk-form")) return;
    if (form.dataset.submitted === "1") { event.preventDefault(); return; }
    form.dataset.submitted = "1";
    window.setTimeout(function () { form.dataset.submitted = ""; }, 4000);
  }, true);
})();
