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
      // Only a button that names its key: a broadcast's page has an Approve button too, and
      // "a" there approved a send to its whole list (the shortcut list says "on the draft page").
      case "a": handled = click("[data-approve][data-key=a]"); break;
      case "n": handled = click("[data-approve-next][data-key=n]"); break;
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

  // The editor's HTML preview follows the textarea. Written into the frame's srcdoc, the HTML
  // fell under this page's policy, which blocks every style attribute and <style> element: the
  // person editing saw text the message hides and not the text its CSS adds. So a moment after
  // the last keystroke the textarea's HTML is posted to the draft's preview URL, which answers
  // with the document the draft page's frame shows (review.views.bodies: its own locked-down
  // policy, frame tags as text), into a new sandboxed frame that takes the shown one's place once
  // it has loaded. A frame that never left its first blank page adds no entry to the tab's
  // history, so Back still leaves the editor.
  var PREVIEW_DELAY_MS = 300;
  var previewTimer = null;
  var previewCount = 0;
  function postPreview() {
    previewTimer = null;
    var field = document.querySelector(".edit-form textarea[name=html]");
    var box = document.querySelector("[data-html-frame]");
    var shown = box && box.querySelector("iframe[data-html-preview]");
    var token = document.querySelector(".edit-form input[name=csrfmiddlewaretoken]");
    if (!field || !shown || !token || field.value.trim() === "") return;
    box.querySelectorAll("iframe[data-html-pending]").forEach(function (old) { old.remove(); });
    var next = shown.cloneNode(false);
    next.removeAttribute("src");
    next.removeAttribute("data-html-preview");
    next.setAttribute("data-html-pending", "");
    previewCount += 1;
    next.name = "cs-html-preview-" + previewCount;
    next.hidden = true;
    box.appendChild(next);
    next.addEventListener("load", function () {
      if (!next.isConnected) return;
      box.querySelectorAll("iframe[data-html-preview]").forEach(function (old) { old.remove(); });
      next.removeAttribute("data-html-pending");
      next.setAttribute("data-html-preview", "");
      next.hidden = false;
    });
    var form = document.createElement("form");
    form.method = "post";
    form.action = box.getAttribute("data-preview-url");
    form.target = next.name;
    form.hidden = true;
    [["csrfmiddlewaretoken", token.value], ["html", field.value]].forEach(function (pair) {
      var input = document.createElement("textarea");
      input.name = pair[0];
      input.value = pair[1];
      form.appendChild(input);
    });
    document.body.appendChild(form);
    form.submit();
    form.remove();
  }
  document.addEventListener("input", function (event) {
    var field = event.target;
    if (!field.matches || !field.matches(".edit-form textarea[name=html]")) return;
    var empty = document.querySelector("[data-html-empty]");
    if (empty) empty.hidden = field.value.trim() !== "";
    var frame = document.querySelector("[data-html-frame]");
    if (frame) frame.hidden = field.value.trim() === "";
    window.clearTimeout(previewTimer);
    previewTimer = window.setTimeout(postPreview, PREVIEW_DELAY_MS);
  });
  // A page that comes back with the person's HTML (a refused save) has no preview yet.
  function firstPreview() {
    var shown = document.querySelector("iframe[data-html-preview]");
    if (shown && !shown.hasAttribute("src")) postPreview();
  }
  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", firstPreview);
  else firstPreview();

  document.addEventListener("focusin", function (event) {
    if (event.target.classList && event.target.classList.contains("copy-field")) event.target.select();
  });

  // --- unsaved text: what a person types in the editor survives a save the server never saw ---
  // A save refused inside the view comes back with the text in the form. One refused before the
  // view runs does not: a session that expired (the sign-in page, then the edit page afresh), a
  // form whose CSRF token went stale when the person signed in again in another tab, a role taken
  // away. So the form's fields are kept in this tab's sessionStorage (gone when the tab closes;
  // the key names the user, so another person signing in here is never offered it) from the
  // first keystroke until the save is seen to succeed (the draft's page follows the submit) or
  // the person cancels or discards it. When the edit page opens with a kept copy that differs
  // from the form, it offers it back; restoring also restores the version the text was typed
  // on, so a version saved meanwhile is shown as a conflict, never overwritten.
  var KEEP_FIELDS = ["to", "cc", "bcc", "subject", "text", "html"];
  var KEEP_HOURS = 24;
  function keptRead(key) {
    try { return JSON.parse(window.sessionStorage.getItem(key) || "null"); } catch (e) { return null; }
  }
  function keptWrite(key, value) {
    try {
      if (value) window.sessionStorage.setItem(key, JSON.stringify(value));
      else window.sessionStorage.removeItem(key);
    } catch (e) { /* storage full or switched off: nothing is kept, nothing breaks */ }
  }
  function formValues(form) {
    var out = {};
    KEEP_FIELDS.forEach(function (name) {
      var field = form.elements[name];
      if (field) out[name] = field.value;
    });
    return out;
  }
  function sameValues(a, b) {
    return KEEP_FIELDS.every(function (name) { return (a[name] || "") === (b[name] || ""); });
  }
  function keepUnsaved(form) {
    var key = form.getAttribute("data-keep-unsaved");
    var base = form.elements.base_version;
    var pending = null;
    var save = function (submitted) {
      keptWrite(key, {
        at: Date.now(), base: base ? base.value : "", fields: formValues(form),
        submitted: !!submitted, done: form.getAttribute("data-done-url"),
      });
    };
    form.addEventListener("input", function () {
      window.clearTimeout(pending);
      pending = window.setTimeout(function () { pending = null; save(false); }, 300);
    });
    form.addEventListener("submit", function () { window.clearTimeout(pending); pending = null; save(true); });
    form.querySelectorAll("[data-unsaved-forget]").forEach(function (link) {
      link.addEventListener("click", function () { window.clearTimeout(pending); pending = null; keptWrite(key, null); });
    });
    // The tab can be taken to the sign-in page mid-sentence (a presence beat after the session
    // ended, tenants.signin_redirect): the last keystrokes are kept too.
    window.addEventListener("pagehide", function () {
      if (pending === null) return;
      window.clearTimeout(pending);
      pending = null;
      save(false);
    });
    var kept = keptRead(key);
    var offer = form.querySelector("[data-unsaved-offer]");
    if (!kept || !kept.fields || Date.now() - kept.at > KEEP_HOURS * 3600 * 1000) {
      keptWrite(key, null);
      return;
    }
    if (kept.submitted) {
      // The edit page again after a submit: that save did not land (refused here, or before
      // the page's code ran), so nothing but its success page may forget this copy.
      kept.submitted = false;
      keptWrite(key, kept);
    }
    if (sameValues(kept.fields, formValues(form)) || !offer) return;
    var time = clockTime(new Date(kept.at), offer.getAttribute("data-time-zone"));
    var line = offer.querySelector("[data-unsaved-text]");
    line.textContent = line.getAttribute("data-template")
      .replace("%(time)s", time).replace("%(version)s", kept.base);
    var newer = offer.querySelector("[data-unsaved-newer]");
    if (newer && base && kept.base && kept.base !== base.value) newer.hidden = false;
    offer.hidden = false;
    offer.querySelector("[data-unsaved-restore]").addEventListener("click", function () {
      KEEP_FIELDS.forEach(function (name) {
        var field = form.elements[name];
        if (field && name in kept.fields) {
          field.value = kept.fields[name];
          field.dispatchEvent(new Event("input", { bubbles: true }));
        }
      });
      if (base && kept.base) base.value = kept.base;
      offer.hidden = true;
      save(false);
    });
    offer.querySelector("[data-unsaved-discard]").addEventListener("click", function () {
      keptWrite(key, null);
      offer.hidden = true;
    });
  }
  function clockTime(when, zone) {
    // In the zone the person chose (every time on these pages is), the browser's if unknown.
    try {
      return new Intl.DateTimeFormat(undefined, {
        hour: "2-digit", minute: "2-digit", hourCycle: "h23", timeZone: zone || undefined,
      }).format(when);
    } catch (e) {
      return ("0" + when.getHours()).slice(-2) + ":" + ("0" + when.getMinutes()).slice(-2);
    }
  }
  function forgetSaved() {
    // Only the page a successful save leads to, which says so ("Saved version N", tagged
    // edit-saved), forgets what this tab kept for that draft. The sign-in page, the CSRF
    // refusal, the edit page and the draft's page opened any other way keep the copy.
    if (!document.querySelector(".flash .edit-saved")) return;
    keptKeys().forEach(function (key) {
      var kept = keptRead(key);
      if (kept && kept.submitted && kept.done === window.location.pathname) keptWrite(key, null);
    });
  }
  function keptKeys() {
    // Every key this tab keeps a text under (none when storage is switched off).
    var keys = [];
    try {
      for (var i = 0; i < window.sessionStorage.length; i += 1) {
        var key = window.sessionStorage.key(i);
        if (key && key.indexOf("cs-unsaved:") === 0) keys.push(key);
      }
    } catch (e) { /* no storage: nothing was kept */ }
    return keys;
  }
  // Signing out forgets every kept text of this tab: the next person at this screen finds none.
  document.addEventListener("submit", function (event) {
    if (!event.target.matches || !event.target.matches("form[data-signout]")) return;
    keptKeys().forEach(function (key) { keptWrite(key, null); });
  });
  function startKeeping() {
    forgetSaved();
    document.querySelectorAll("form[data-keep-unsaved]").forEach(keepUnsaved);
  }
  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", startKeeping);
  else startKeeping();

  // --- busy: every htmx action says so (aria-busy on what it updates, its buttons disabled) ---
  function busy(event, on) {
    var elt = event.detail && event.detail.elt;
    if (!elt || elt.hasAttribute("data-quiet")) return;
    var target = event.detail.target || elt;
    if (on) target.setAttribute("aria-busy", "true"); else target.removeAttribute("aria-busy");
    var form = elt.tagName === "FORM" ? elt : elt.closest && elt.closest("form");
    if (form) {
      form.querySelectorAll("button[type=submit], button:not([type])").forEach(function (b) {
        if (on) { b.dataset.wasDisabled = b.disabled ? "1" : ""; b.disabled = true; }
        else if (!b.dataset.wasDisabled) b.disabled = false;
      });
    }
  }
  document.addEventListener("htmx:beforeRequest", function (e) { busy(e, true); });
  document.addEventListener("htmx:afterRequest", function (e) { busy(e, false); });

  // --- a failed htmx request says so. htmx swaps nothing of a 4xx/5xx answer (its default
  // responseHandling), so a refused click (a role taken away, a tenant suspended since the page
  // was loaded) seemed to do nothing. The alert in base.html carries the server's own words when
  // the answer is one of our error pages (403.html and 404.html mark them), read from an inert
  // document and set as text, never as HTML; else a translated line for the status. Only what
  // the person did shows or hides it: a refused poll is not something they did (the status
  // under it says the page stopped updating), and a presence beat that succeeds says nothing
  // of an approval refused a moment ago. ---
  var SERVER_WORDS_MAX = 300;
  function byThePerson(detail) {
    var elt = detail && detail.elt;
    if (!elt || elt.hasAttribute("data-quiet")) return false;
    // htmx sends polls ("every 6s") and "load" triggers with no triggering event.
    return !!(detail.requestConfig && detail.requestConfig.triggeringEvent);
  }
  function serverWords(type, body) {
    if (type.indexOf("text/html") !== 0 || !window.DOMParser) return "";
    var page = new DOMParser().parseFromString(body || "", "text/html");
    var said = page.querySelector("main [data-error-message]");
    var words = said ? said.textContent.replace(/\s+/g, " ").trim() : "";
    return words.length > SERVER_WORDS_MAX ? words.slice(0, SERVER_WORDS_MAX - 1) + "…" : words;
  }
  function requestAlert(text) {
    var region = document.getElementById("request-error");
    if (!region) return;
    region.textContent = text;
    region.hidden = !text;
  }
  document.addEventListener("htmx:responseError", function (event) {
    var region = document.getElementById("request-error");
    if (!region || !byThePerson(event.detail)) return;
    var xhr = event.detail.xhr;
    var key = { 403: "data-forbidden", 404: "data-not-found", 409: "data-conflict" }[xhr.status];
    var fallback = region.getAttribute(key || "data-failed").replace("%(status)s", xhr.status);
    var words = serverWords(xhr.getResponseHeader("Content-Type") || "", xhr.responseText);
    requestAlert((words || fallback) + " " + region.getAttribute("data-reload"));
  });
  document.addEventListener("htmx:sendError", function (event) {
    var region = document.getElementById("request-error");
    if (region && byThePerson(event.detail)) requestAlert(region.getAttribute("data-unreachable"));
  });
  document.addEventListener("htmx:afterRequest", function (event) {
    if (event.detail.successful && byThePerson(event.detail)) requestAlert("");
  });

  // --- a page that stops updating says so, once. Its polls (an hx-trigger "every …", the
  // navigation's counts) are refused for good when the person's membership ended, their role
  // was taken away or the tenant was suspended since the page was loaded (a session that ended
  // takes the tab to the sign-in page instead: tenants.signin_redirect). The alert above is for
  // what the person did, so this is a polite status under it: the server's own words as the
  // alert reads them, a link that reloads the page, and every poll of the page stops, since
  // asking again every few seconds gets the same answer. No answer, a 5xx or a 429 is not for
  // good: the polls go on, and only a failure that lasts is said, softly, and unsaid by the next
  // answer. A suspended tenant's page sends no poll its state refuses (its presence beat is left
  // out: review/draft.html), so it says nothing. ---
  var POLLS = "[hx-trigger*='every '], [data-poll-seconds]";
  var liveStopped = false;
  var failingSince = null;
  var countsTimer = null;
  function inBackground(detail) {
    // Polls, "load" triggers and [data-quiet] requests: what the page did, not the person.
    return !!(detail && detail.elt) && !byThePerson(detail);
  }
  function liveSay(text, onward) {
    var region = document.getElementById("live-stopped");
    if (!region) return;
    region.hidden = !text;
    region.classList.toggle("soft", !onward);
    region.querySelector("[data-live-text]").textContent = text;
    region.querySelector("[data-live-onward]").hidden = !onward;
  }
  function stopPolling() {
    window.clearInterval(countsTimer);
    document.querySelectorAll(POLLS).forEach(function (elt) {
      // hx-disable, then process: htmx clears the element's timer and listeners and sends
      // nothing for it again.
      elt.setAttribute("hx-disable", "");
      if (window.htmx) window.htmx.process(elt);
      elt.querySelectorAll("[data-poll-note]").forEach(function (note) {
        note.textContent = note.getAttribute("data-stopped");
      });
    });
  }
  function stillUnreachable() {
    var region = document.getElementById("live-stopped");
    if (liveStopped || !region) return;
    var now = Date.now();
    if (failingSince === null) { failingSince = now; return; }
    var after = (parseInt(region.getAttribute("data-unreachable-after-seconds"), 10) || 30) * 1000;
    if (region.hidden && now - failingSince >= after) liveSay(region.getAttribute("data-unreachable"), false);
  }
  document.addEventListener("htmx:responseError", function (event) {
    var region = document.getElementById("live-stopped");
    if (!region || !inBackground(event.detail)) return;
    var xhr = event.detail.xhr;
    if (xhr.status >= 500 || xhr.status === 408 || xhr.status === 429) { stillUnreachable(); return; }
    if (liveStopped) return;
    liveStopped = true;
    stopPolling();
    var key = { 401: "data-forbidden", 403: "data-forbidden", 404: "data-not-found", 410: "data-not-found" }[xhr.status];
    var fallback = region.getAttribute(key || "data-failed").replace("%(status)s", xhr.status);
    var words = serverWords(xhr.getResponseHeader("Content-Type") || "", xhr.responseText);
    liveSay(region.getAttribute("data-stopped") + " " + (words || fallback), true);
  });
  document.addEventListener("htmx:sendError", function (event) {
    if (inBackground(event.detail)) stillUnreachable();
  });
  // Once stopped, an answer still on its way swaps nothing in (a fresh "every 3s" element
  // would start polling again), and nothing of the page's own asks again.
  document.addEventListener("htmx:beforeSwap", function (event) {
    if (liveStopped && inBackground(event.detail)) event.detail.shouldSwap = false;
  });
  document.addEventListener("htmx:beforeRequest", function (event) {
    if (!liveStopped || !inBackground(event.detail)) return;
    event.preventDefault();
    event.stopPropagation(); // before busy() marks what it would update
  }, true);
  document.addEventListener("htmx:afterRequest", function (event) {
    if (!event.detail.successful || !inBackground(event.detail)) return;
    failingSince = null;
    var region = document.getElementById("live-stopped");
    if (region && !region.hidden && !liveStopped) liveSay("", false);
  });

  // --- live counts in the navigation: a poll every N s while the tab is visible. htmx's trigger
  // filters ([document.visibilityState=='visible']) need eval, which the CSP forbids. ---
  function refreshCounts() {
    var el = document.getElementById("nav-counts");
    if (el && !liveStopped && window.htmx && document.visibilityState === "visible") window.htmx.trigger(el, "cs:refresh");
  }
  var poller = document.getElementById("nav-counts");
  if (poller) {
    var seconds = parseInt(poller.getAttribute("data-poll-seconds"), 10) || 15;
    countsTimer = window.setInterval(refreshCounts, seconds * 1000);
    document.addEventListener("visibilitychange", refreshCounts);
  }

  // --- bulk approve, one draft per request so the person sees "Approving 3 of 12…"; the server
  // decides each exactly as for the whole form (version and hash of its row). Without this
  // script, the form posts all at once and the page comes back with the result. ---
  function bulkApprove(form) {
    var boxes = Array.prototype.slice.call(form.querySelectorAll("[data-queue] input[name=item]:checked"));
    var status = form.querySelector("[data-bulk-progress]");
    var button = form.querySelector("[data-bulk-approve]");
    if (!boxes.length || !status || !window.fetch) return false;
    var token = form.querySelector("input[name=csrfmiddlewaretoken]").value;
    var total = boxes.length, done = 0, approved = 0, refused = 0;
    var text = function (key) { return status.getAttribute(key); };
    var fill = function (template) {
      return template.replace("{done}", done).replace("{total}", total)
        .replace("{approved}", approved).replace("{refused}", refused);
    };
    button.disabled = true;
    form.setAttribute("aria-busy", "true");
    var mark = function (box, state, message) {
      var row = box.closest("[data-row]");
      box.disabled = true;
      if (!row) return;
      row.setAttribute("data-bulk-state", state);
      var note = document.createElement("span");
      note.setAttribute("data-bulk-result", state);
      note.className = state === "approved" ? "badge ok" : "badge bad";
      note.textContent = message;
      row.querySelector(".qmain").appendChild(note);
    };
    // A refusal before the view ran (the role taken away, the membership ended, the tenant
    // suspended, a stale form token since the queue was loaded) is one of our error pages, not
    // JSON: the row gives its words, since nothing was approved. Anything else unreadable (a
    // 5xx, the sign-in page) may or may not have approved it: the row says to reload.
    var answer = function (r) {
      var type = r.headers.get("Content-Type") || "";
      if (type.indexOf("application/json") === 0) return r.json();
      if (r.status < 400 || r.status >= 500) throw new Error("unreadable answer");
      return r.text().then(function (body) {
        var region = document.getElementById("request-error");
        var key = { 403: "data-forbidden", 404: "data-not-found", 409: "data-conflict" }[r.status];
        var fallback = region && key ? region.getAttribute(key) : "";
        var words = serverWords(type, body) || fallback;
        if (!words) throw new Error("unreadable answer");
        return { approved: 0, error: words };
      });
    };
    var next = function () {
      if (done === total) {
        form.removeAttribute("aria-busy");
        status.textContent = fill(text(refused ? "data-done-refused" : "data-done"));
        var again = form.querySelector("[data-bulk-refresh]");
        if (again) again.hidden = false;
        return;
      }
      var box = boxes[done];
      status.textContent = text("data-working").replace("{done}", done + 1).replace("{total}", total);
      var body = new URLSearchParams();
      body.append("csrfmiddlewaretoken", token);
      body.append("item", box.value);
      window.fetch(form.action, {
        method: "POST", body: body, credentials: "same-origin",
        headers: { "X-CSRFToken": token, "X-Bulk-Progress": "1" }
      }).then(answer).then(function (result) {
        if (result.approved) { approved += 1; mark(box, "approved", text("data-approved")); }
        else { refused += 1; mark(box, "refused", (result.refused && result.refused[0] && result.refused[0].message) || result.error || ""); }
      }, function () {
        refused += 1; mark(box, "refused", text("data-failed"));
      }).then(function () { done += 1; next(); });
    };
    next();
    return true;
  }

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

  // A form posted once until its answer replaces the page: a second submit is dropped. If no
  // answer comes (the person stopped the request), the form is free again after ``seconds``
  // (then ``released(form)``, if given). False when this submit was the dropped second one.
  function submitOnce(event, form, seconds, released) {
    if (form.dataset.submitted === "1") { event.preventDefault(); return false; }
    form.dataset.submitted = "1";
    window.setTimeout(function () {
      form.dataset.submitted = "";
      if (released) released(form);
    }, seconds * 1000);
    return true;
  }

  // One approval per click: a double-click must not post twice (the server refuses the second,
  // but the person would see a confusing "already approved").
  document.addEventListener("submit", function (event) {
    var form = event.target;
    if (!form.matches("[data-approve-form], #bulk-form")) return;
    if (form.dataset.submitted === "1") { event.preventDefault(); return; }
    if (form.matches("[data-bulk-form]") && bulkApprove(form)) {
      event.preventDefault();
      form.dataset.submitted = "1";
      return;
    }
    submitOnce(event, form, 4);
  }, true);

  // One post per form whose answer shows a secret once ([data-once]: an agent token, an agent
  // events endpoint's signing secret, added or rotated). The browser shows the last answer, so a
  // second click while the first answer was on its way replaced the secret with "already
  // exists". The answer replaces this page; if none comes (the person stopped the request), the
  // form is free again after ONCE_SECONDS, and on coming back to the page (pageshow). A failed
  // request leaves the page for the browser's error page, and going back loads the form afresh.
  // The server answers a second post of the same form truthfully too (tenants.once_forms).
  var ONCE_SECONDS = 10;
  function onceRelease(form) {
    form.dataset.submitted = "";
    form.removeAttribute("aria-busy");
    form.querySelectorAll("button[type=submit]").forEach(function (b) { b.removeAttribute("aria-disabled"); });
  }
  document.addEventListener("submit", function (event) {
    var form = event.target;
    if (event.defaultPrevented || !form.matches || !form.matches("form[data-once]")) return;
    if (!submitOnce(event, form, ONCE_SECONDS, onceRelease)) return;
    form.setAttribute("aria-busy", "true");
    // aria-disabled, not disabled: the button stays in the form's submission and keeps focus.
    form.querySelectorAll("button[type=submit]").forEach(function (b) { b.setAttribute("aria-disabled", "true"); });
  });
  window.addEventListener("pageshow", function () {
    document.querySelectorAll("form[data-once]").forEach(onceRelease);
  });
})();
