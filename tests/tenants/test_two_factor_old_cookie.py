"""A second click on a sign-in step that renews the session key: turning on the authenticator
("Turn on two-factor sign-in") and the code of the second-factor step ("Verify"). The first
click's answer carries the new session cookie; a browser that sent the second click before that
answer arrived (a double click, a slow network) sends the old one, whose session the renewal
deleted. That browser is signed out (the renewal is what keeps a planted copy of the old cookie
worthless), and the sign-in page said nothing: the person had just turned two-factor on, or
signed in, and found themselves asked for their password with no word of why, their recovery
codes on a page they never saw."""

import pyotp
import pytest
from django.conf import settings
from django.test import Client
from django.urls import reverse

from tenants import two_factor
from tenants.models import TotpDevice
from tests.tenants.test_two_factor import next_step_code
from tests.tenants.test_two_factor_confirm_twice import enrolment_page

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def _no_throttle_delay(settings):
    settings.OTP_TOTP_THROTTLE_FACTOR = 0


def session_cookie(client) -> str:
    return client.cookies[settings.SESSION_COOKIE_NAME].value


def test_a_second_turn_on_with_the_old_cookie_says_why_the_browser_is_signed_out(
    tenant_a, member_of, password
):
    user = member_of(tenant_a, "approver").user
    client = Client()
    client.post(reverse("login"), {"username": user.email, "password": password})
    secret, fields = enrolment_page(client)
    posted = {**fields, "code": pyotp.TOTP(secret).now()}
    old = session_cookie(client)
    first = client.post(reverse("totp_confirm"), posted)
    client.cookies[settings.SESSION_COOKIE_NAME] = old

    second = client.post(reverse("totp_confirm"), posted)

    assert first.status_code == 200 and session_cookie(client) != old
    assert second.status_code == 302
    assert second["Location"] == f"{reverse('login')}?next={reverse('account_security')}"
    page = client.get(second["Location"]).content.decode()
    assert "this browser is signed out" in page
    assert "Turn on" in page and "recovery codes" in page
    assert TotpDevice.objects.get(user=user).confirmed


def test_a_second_verify_with_the_old_cookie_says_why_the_browser_is_signed_out(
    tenant_a, member_of, password
):
    user = member_of(tenant_a, "approver").user
    device = two_factor.totp_begin(user=user)
    secret = two_factor.totp_secret(device)
    two_factor.totp_confirm(user=user, code=pyotp.TOTP(secret).now())
    client = Client()
    client.post(reverse("login"), {"username": user.email, "password": password})
    posted = {"code": next_step_code(secret), "next": "/t/tenant-a/"}
    old = session_cookie(client)
    first = client.post(reverse("two_factor_verify"), posted)
    client.cookies[settings.SESSION_COOKIE_NAME] = old

    second = client.post(reverse("two_factor_verify"), posted)

    assert first.status_code == 302 and first["Location"] == "/t/tenant-a/"
    assert second.status_code == 302
    assert second["Location"] == f"{reverse('login')}?next=/t/tenant-a/"
    page = client.get(second["Location"]).content.decode()
    assert "this browser is signed out" in page and "Verify" in page


def test_a_post_without_any_session_cookie_is_sent_to_sign_in_as_before(tenant_a):
    client = Client()
    answer = client.post(reverse("totp_confirm"), {"code": "123456"})
    assert answer.status_code == 302 and answer["Location"].startswith(reverse("login"))
    assert "signed out" not in client.get(answer["Location"]).content.decode()
