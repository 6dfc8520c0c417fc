// Passkeys (WebAuthn): register one on the security page, sign in with one on the sign-in and
// second-factor pages. Loaded only there; a static file, so the CSP needs no 'unsafe-inline'.
// Without WebAuthn in the browser the buttons stay hidden and the other ways to sign in remain.
(function () {
  "use strict";

  function csrfToken() {
    try {
      return JSON.parse(document.body.getAttribute("hx-headers") || "{}")["X-CSRFToken"] || "";
    } catch (e) {
      return "";
    }
  }

  function post(url, body) {
    return fetch(url, {
      method: "POST",
      credentials: "same-origin",
      headers: { "Content-Type": "application/json", "X-CSRFToken": csrfToken() },
      body: body ? JSON.stringify(body) : "{}",
    }).then(function (response) {
      return response.json().then(function (data) {
        if (!response.ok) {
          // A refusal that names a page to go to: "Confirm it is you" first (tenants.sudo).
          if (data.redirect) window.location.assign(data.redirect);
          throw new Error(data.message || "");
        }
        return data;
      });
    });
  }

  // The words come from the page (data-cancelled, data-failed), so they are in the reader's language;
  // a refusal of ours carries its own translated message.
  function showError(box, error) {
    var message = box.querySelector("[data-passkey-error]");
    if (!message) return;
    message.textContent = error && error.name === "NotAllowedError"
      ? message.getAttribute("data-cancelled") || error.message
      : (error && error.message) || message.getAttribute("data-failed") || String(error);
    message.hidden = false;
    message.focus();
  }

  function register(box) {
    var nameInput = box.querySelector("[data-passkey-name]");
    post(box.getAttribute("data-options-url"))
      .then(function (options) {
        var publicKey = PublicKeyCredential.parseCreationOptionsFromJSON(options);
        return navigator.credentials.create({ publicKey: publicKey });
      })
      .then(function (credential) {
        return post(box.getAttribute("data-finish-url"), {
          credential: credential.toJSON(),
          name: nameInput ? nameInput.value : "",
        });
      })
      .then(function (data) { window.location.assign(data.redirect); })
      .catch(function (error) { showError(box, error); });
  }

  function signIn(box) {
    var next = box.getAttribute("data-next") || "";
    var finish = box.getAttribute("data-finish-url") + (next ? "?next=" + encodeURIComponent(next) : "");
    post(box.getAttribute("data-options-url"))
      .then(function (options) {
        var publicKey = PublicKeyCredential.parseRequestOptionsFromJSON(options);
        return navigator.credentials.get({ publicKey: publicKey });
      })
      .then(function (credential) { return post(finish, { credential: credential.toJSON() }); })
      .then(function (data) { window.location.assign(data.redirect); })
      .catch(function (error) { showError(box, error); });
  }

  function wire(selector, action) {
    document.querySelectorAll(selector).forEach(function (box) {
      var button = box.querySelector("button[data-passkey-action]");
      if (!button) return;
      button.hidden = false;
      if (box.tagName === "FORM") {
        box.addEventListener("submit", function (event) { event.preventDefault(); action(box); });
      } else {
        button.addEventListener("click", function () { action(box); });
      }
    });
  }

  if (!window.PublicKeyCredential || !PublicKeyCredential.parseCreationOptionsFromJSON) return;
  document.querySelectorAll("[data-passkey-unsupported]").forEach(function (el) { el.hidden = true; });
  wire("[data-passkey-register-box]", register);
  wire("[data-passkey-signin-box]", signIn);
})();
