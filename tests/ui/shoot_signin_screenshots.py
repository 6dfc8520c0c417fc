"""Screenshots of the sign-in pages (two-factor, passkeys, sessions, the tenant's sign-in settings)
for docs/screenshots (run on demand, not in CI):

COUNTERSIGN_ENV=test .tools/bin/uv run pytest tests/ui/shoot_signin_screenshots.py
"""

import os
from pathlib import Path

import pyotp
import pytest
from django.conf import settings

from tenants import oidc_signin, two_factor
from tests.browser import sign_in
from tests.factories import PASSWORD

OUT = Path(os.environ.get("SCREENSHOT_DIR", Path(settings.BASE_DIR) / "docs" / "screenshots"))
pytestmark = pytest.mark.browser
WIDTHS = {"desktop": 1280, "phone": 390}


def shoot(page, name):
    OUT.mkdir(parents=True, exist_ok=True)
    for label, width in WIDTHS.items():
        page.set_viewport_size({"width": width, "height": 900})
        page.screenshot(path=str(OUT / f"signin-{name}-{label}.png"), full_page=True)
    page.set_viewport_size({"width": 1280, "height": 900})


def test_shoot_signin_pages(page, transactional_db, tenant_a, member_of, live_server):
    admin = member_of(tenant_a, "admin", user__full_name="Ada Admin")
    sign_in(page, admin.user)
    page.goto("/account/security/")
    shoot(page, "security-off")
    page.click("button:has-text('Set up an authenticator app')")
    shoot(page, "totp-enrol")
    secret = page.locator("#totp-secret").inner_text().strip()
    page.fill("input[name=code]", pyotp.TOTP(secret).now())
    page.click("button:has-text('Turn on two-factor sign-in')")
    shoot(page, "recovery-codes")
    page.goto("/account/security/")
    shoot(page, "security-on")
    page.goto("/account/sessions/")
    shoot(page, "sessions")
    oidc_signin.sso_settings_save(
        tenant=tenant_a,
        actor=admin.user,
        enabled=True,
        issuer="https://login.acme.test/realms/acme",
        client_id="countersign",
        client_secret="not-shown-again",
        password_signin_allowed=True,
        domains=["acme.test", "acme.de"],
        jit_role="viewer",
    )
    page.goto(f"/t/{tenant_a.slug}/admin/sign-in/")
    shoot(page, "admin-settings")
    other = page.context.browser.new_context(base_url=live_server.url).new_page()
    other.goto("/signin/")
    shoot(other, "login")
    other.goto("/sso/")
    shoot(other, "sso-choose")
    other.goto(f"/sso/?tenant={tenant_a.slug}")
    shoot(other, "sso-continue")
    other.goto("/signin/")
    other.fill("input[name=username]", admin.user.email)
    assert two_factor.recovery_codes_left(admin.user) == 10
    other.fill("input[name=password]", PASSWORD)
    other.click("button[type=submit]")
    other.wait_for_url("**/signin/two-factor/**")
    shoot(other, "verify")
    other.context.close()
