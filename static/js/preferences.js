// The preferences page: offer the browser's own time zone (Intl) when it differs from the field.
// Progressive enhancement: the form works the same without it.
(function () {
  "use strict";
  document.addEventListener("DOMContentLoaded", function () {
    var field = document.getElementById("id_time_zone");
    var hint = document.getElementById("browser-zone");
    var zone = "";
    try { zone = Intl.DateTimeFormat().resolvedOptions().timeZone || ""; } catch (e) { zone = ""; }
    if (!field || !hint || !zone || field.value === zone) return;
    var known = Array.prototype.some.call(
      document.querySelectorAll("#time-zones option"),
      function (option) { return option.value === zone; }
    );
    if (!known) return;
    hint.querySelector("[data-browser-zone]").textContent = zone;
    hint.hidden = false;
    hint.querySelector("[data-use-browser-zone]").addEventListener("click", function () {
      field.value = zone;
      hint.hidden = true;
      field.focus();
    });
  });
})();
