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

  document.addEventListener("focusin", function (event) {
    if (event.target.classList && event.target.classList.contains("copy-field")) event.target.select();
  });

  // Undo windows: count down from the seconds the server measured (its clock, not this one's).
  // Display only: at zero the button goes away, and a late click is refused by the server.
  function startUndoCountdowns() {
    var started = Date.now();
    var forms = Array.prototype.slice.call(document.querySelectorAll("[data-undo]"));
    if (!forms.length) return;
    function tick() {
      var open = 0;
      forms.forEach(function (form) {
        var total = parseInt(form.dataset.secondsLeft, 10) || 0;
        var left = Math.max(0, Math.ceil(total - (Date.now() - started) / 1000));
        var count = form.querySelector("[data-countdown]");
        if (count) count.textContent = String(left);
        if (left > 0) { open += 1; return; }
        if (form.dataset.closed === "1") return;
        form.dataset.closed = "1";
        var button = form.querySelector("[data-undo-button]");
        if (button) { button.disabled = true; button.hidden = true; }
        var openText = form.querySelector("[data-undo-open]");
        var closedText = form.querySelector("[data-undo-closed]");
        if (openText) openText.hidden = true;
        if (closedText) closedText.hidden = false;
        var status = form.querySelector("[data-undo-status]");
        if (status && closedText) status.textContent = closedText.textContent;
      });
      if (open) window.setTimeout(tick, 250);
    }
    tick();
  }
  if (document.readyState === "loading") {
    document.addEventListener("DOMContentLoaded", startUndoCountdowns);
  } else {
    startUndoCountdowns();
  }

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
