"""In headless Chromium with its virtual authenticator (DevTools' WebAuthn domain through
Playwright's CDP session): a member registers a passkey, signs out, and signs in with it alone;
a member with a password and a passkey uses it as the second factor. WebAuthn needs a secure
context: http://localhost is one, and the live server answers on localhost (RP ID "localhost")."""

import re

from tenants.models import AuditEvent, Passkey
from tests.browser import BROWSER_MARKS, sign_in
from tests.factories import PASSWORD

pytestmark = BROWSER_MARKS


def virtual_authenticator(page):
    cdp = page.context.new_cdp_session(page)
    cdp.send("WebAuthn.enable")
    cdp.send(
        "WebAuthn.addVirtualAuthenticator",
        {
            "options": {
                "protocol": "ctap2",
                "transport": "internal",
                "hasResidentKey": True,
                "hasUserVerification": True,
                "isUserVerified": True,
            }
        },
    )
    return cdp


def add_passkey(page, name):
    page.goto("/account/security/")
    page.fill("#passkey-name", name)
    page.click("button:has-text('Add a passkey')")
    page.wait_for_selector(f"#passkeys >> text={name}")


def test_register_a_passkey_then_sign_in_with_it_alone(
    page, live_server, transactional_db, tenant_a, member_of
):
    assert live_server.url.startswith("http://localhost:")
    user = member_of(tenant_a, "approver").user
    virtual_authenticator(page)
    sign_in(page, user)
    add_passkey(page, "Work laptop")
    passkey = Passkey.objects.get(user=user)
    assert passkey.name == "Work laptop" and passkey.sign_count >= 0
    page.click("header form button:has-text('Sign out')")
    page.wait_for_url("**/signin/")

    page.click("button:has-text('Sign in with a passkey')")
    page.wait_for_url(re.compile(rf"/t/{tenant_a.slug}/$"))
    assert page.locator("header .user", has_text=user.display_name).count() == 1
    actions = list(AuditEvent.objects.filter(tenant=tenant_a).values_list("action", "data"))
    assert ("signin.succeeded", {"email": user.email, "method": "passkey"}) in actions
    assert any(action == "signin.passkey_added" for action, _ in actions)


def test_a_passkey_as_the_second_factor_after_the_password(
    page, live_server, transactional_db, tenant_a, member_of
):
    user = member_of(tenant_a, "approver").user
    virtual_authenticator(page)
    sign_in(page, user)
    add_passkey(page, "Phone")
    page.click("header form button:has-text('Sign out')")
    page.wait_for_url("**/signin/")

    page.fill("input[name=username]", user.email)
    page.fill("input[name=password]", PASSWORD)
    page.click("form button[type=submit]:has-text('Sign in')")
    page.wait_for_url("**/signin/two-factor/**")
    page.goto(f"/t/{tenant_a.slug}/outbox/")
    assert "/signin/two-factor/" in page.url
    page.click("button:has-text('Use a passkey')")
    page.wait_for_url(re.compile(rf"/t/{tenant_a.slug}/outbox/$"))
    assert AuditEvent.objects.filter(
        action="signin.second_factor_verified", data__factor="passkey"
    ).exists()
