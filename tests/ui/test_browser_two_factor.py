"""In headless Chromium: a member sets up an authenticator app (the code computed with pyotp from
the secret the page shows), signs out, signs in with a code; a wrong or reused code is refused;
recovery codes work once each; a tenant requiring two-factor sends an unenrolled member to
enrolment and nothing else answers for them."""

import re
import time

import pyotp
import pytest
from playwright.sync_api import expect

from tenants.models import RecoveryCode, Tenant, TotpDevice
from tenants.two_factor import recovery_digest
from tests.browser import BROWSER_MARKS
from tests.console.test_browser_shown_once import SlowFirstAnswer, click_twice_while_slow, shoot
from tests.factories import PASSWORD

pytestmark = BROWSER_MARKS


@pytest.fixture(autouse=True)
def _no_throttle_delay(settings):
    settings.OTP_TOTP_THROTTLE_FACTOR = 0


def password_step(page, user):
    page.goto("/signin/")
    page.fill("input[name=username]", user.email)
    page.fill("input[name=password]", PASSWORD)
    page.click("button[type=submit]")


def sign_out(page):
    page.click("header form button:has-text('Sign out')")
    page.wait_for_url("**/signin/")


def enrol(page):
    page.goto("/account/security/")
    page.click("button:has-text('Set up an authenticator app')")
    secret = page.locator("#totp-secret").inner_text().strip()
    code = pyotp.TOTP(secret).now()
    page.fill("input[name=code]", code)
    page.click("button:has-text('Turn on two-factor sign-in')")
    # The click does not wait for the page its POST answers with (the codes are in that answer);
    # reading the list at once read the enrolment page on a loaded CI machine: no codes at all.
    page.locator("#recovery-codes li").first.wait_for()
    codes = page.locator("#recovery-codes li").all_inner_texts()
    return secret, code, [c.strip() for c in codes]


def test_enrol_sign_out_and_sign_in_with_the_code(page, transactional_db, tenant_a, member_of):
    user = member_of(tenant_a, "approver").user
    password_step(page, user)
    page.wait_for_url(re.compile(rf"/t/{tenant_a.slug}/$"))
    secret, enrolment_code, codes = enrol(page)
    assert len(codes) == 10
    assert page.locator("[role=status]", has_text="Two-factor sign-in is on").count() == 1
    sign_out(page)

    password_step(page, user)
    page.wait_for_url("**/signin/two-factor/**")
    page.goto(f"/t/{tenant_a.slug}/")
    assert "/signin/two-factor/" in page.url
    # The code of the enrolment is spent: the same one is refused. (Not the code of this moment:
    # on a loaded machine a 30 s step may have passed since the enrolment, and that code is new.)
    page.fill("input[name=code]", enrolment_code)
    page.click("button:has-text('Verify')")
    expect(page.locator("[role=alert]", has_text="not right")).to_have_count(1)
    page.fill("input[name=code]", pyotp.TOTP(secret).at(time.time() + 30))
    page.click("button:has-text('Verify')")
    page.wait_for_url(re.compile(rf"/t/{tenant_a.slug}/$"))
    sign_out(page)

    password_step(page, user)
    page.wait_for_url("**/signin/two-factor/**")
    page.fill("input[name=code]", codes[0])
    page.click("button:has-text('Verify')")
    page.wait_for_url(re.compile(rf"/t/{tenant_a.slug}/$"))
    assert page.locator(".flash", has_text="9 are left").count() == 1
    sign_out(page)

    password_step(page, user)
    page.wait_for_url("**/signin/two-factor/**")
    page.fill("input[name=code]", codes[0])
    page.click("button:has-text('Verify')")
    expect(page.locator("[role=alert]", has_text="already used")).to_have_count(1)
    page.fill("input[name=code]", codes[1])
    page.click("button:has-text('Verify')")
    page.wait_for_url(re.compile(rf"/t/{tenant_a.slug}/$"))


def test_a_tenant_requiring_it_leads_an_unenrolled_member_to_enrolment_only(
    page, transactional_db, tenant_a, member_of
):
    Tenant.objects.filter(pk=tenant_a.pk).update(require_two_factor=True)
    user = member_of(tenant_a, "approver").user
    password_step(page, user)
    page.wait_for_url("**/account/security/")
    assert page.locator("[role=alert]", has_text="requires two-factor sign-in").count() == 1
    for path in (f"/t/{tenant_a.slug}/", f"/t/{tenant_a.slug}/outbox/", "/account/sessions/"):
        page.goto(path)
        assert page.url.endswith("/account/security/"), path
    enrol(page)
    page.click("text=I have saved them")
    page.wait_for_url(re.compile(rf"/t/{tenant_a.slug}/$"))


def test_a_second_click_on_turn_on_while_the_first_is_slow_shows_the_recovery_codes(
    page, transactional_db, tenant_a, member_of
):
    """Found by an outside probe: the second answer, "Start again: there is no set-up in
    progress.", replaced the page of recovery codes (shown only once) while two-factor was on."""
    user = member_of(tenant_a, "approver").user
    password_step(page, user)
    page.wait_for_url(re.compile(rf"/t/{tenant_a.slug}/$"))
    page.goto("/account/security/")
    page.click("button:has-text('Set up an authenticator app')")
    secret = page.locator("#totp-secret").inner_text().strip()
    page.fill("input[name=code]", pyotp.TOTP(secret).now())
    slow = SlowFirstAnswer()
    page.route("**/account/security/totp/confirm/", slow)

    click_twice_while_slow(page, "button:has-text('Turn on two-factor sign-in')", slow)

    expect(page.locator("h1")).to_have_text("Your recovery codes")
    codes = [c.strip() for c in page.locator("#recovery-codes li").all_inner_texts()]
    assert {recovery_digest(c) for c in codes} == set(
        RecoveryCode.objects.filter(user=user).values_list("digest", flat=True)
    )
    assert len(codes) == 10 and slow.posts == 1
    shoot(page, "totp-recovery-codes")


def test_the_set_up_confirmed_from_another_tab_says_so_and_offers_new_codes(
    page, transactional_db, tenant_a, member_of
):
    """The server's half: a second post of the same set-up (here from a second tab of the same
    page) says the first one turned it on, shows no codes, and offers to make new ones."""
    user = member_of(tenant_a, "approver").user
    password_step(page, user)
    page.wait_for_url(re.compile(rf"/t/{tenant_a.slug}/$"))
    page.goto("/account/security/")
    page.click("button:has-text('Set up an authenticator app')")
    secret = page.locator("#totp-secret").inner_text().strip()
    stale = page.context.new_page()
    stale.goto("/account/security/totp/")
    page.fill("input[name=code]", pyotp.TOTP(secret).now())
    page.click("button:has-text('Turn on two-factor sign-in')")
    first = [c.strip() for c in page.locator("#recovery-codes li").all_inner_texts()]

    stale.fill("input[name=code]", pyotp.TOTP(secret).now())
    stale.click("button:has-text('Turn on two-factor sign-in')")

    expect(stale.locator("h1")).to_have_text("Two-factor sign-in is already on")
    assert stale.locator("#recovery-codes").count() == 0
    assert not any(code in stale.content() for code in first)
    assert TotpDevice.objects.get(user=user).confirmed
    shoot(stale, "totp-already-on")
    stale.click("button:has-text('Make new recovery codes')")
    expect(stale.locator("h1")).to_have_text("Your recovery codes")
    renewed = [c.strip() for c in stale.locator("#recovery-codes li").all_inner_texts()]
    assert len(renewed) == 10 and not set(renewed) & set(first)
