"""The authenticator's confirmation posted twice (a second click on "Turn on two-factor sign-in"
while the first answer is on its way). Found by an outside probe: the browser showed the second
answer, "Start again: there is no set-up in progress.", on the Security page, while two-factor
sign-in was on and its recovery codes, shown only once, were on the first answer nobody saw."""

import re
import threading

import pyotp
import pytest
from django.db import connection
from django.test import Client
from django.urls import reverse

from tenants import two_factor
from tenants.models import AuditEvent, RecoveryCode, TotpDevice

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def _no_throttle_delay(settings):
    settings.OTP_TOTP_THROTTLE_FACTOR = 0


def enrolment_page(client):
    """The secret and the fields the confirmation form posts besides the code."""
    page = client.post(reverse("totp_enrol")).content.decode()
    form = page[page.index('action="' + reverse("totp_confirm")) :]
    form = form[: form.index("</form>")]
    hidden = dict(re.findall(r'<input type="hidden" name="(\w+)" value="([^"]*)"', form))
    hidden.pop("csrfmiddlewaretoken", None)
    secret = re.search(r'id="totp-secret">([A-Z2-7=]+)<', page).group(1)
    return secret, hidden


def test_a_second_post_of_the_confirmation_says_the_first_turned_it_on(
    tenant_a, member_of, password
):
    user = member_of(tenant_a, "approver").user
    client = Client()
    client.post(reverse("login"), {"username": user.email, "password": password})
    secret, fields = enrolment_page(client)
    posted = {**fields, "code": pyotp.TOTP(secret).now()}

    first = client.post(reverse("totp_confirm"), posted)
    digests = set(RecoveryCode.objects.filter(user=user).values_list("digest", flat=True))
    second = client.post(reverse("totp_confirm"), posted)

    assert first.status_code == 200 and len(first.context["codes"]) == 10
    assert second.status_code == 409
    text = second.content.decode()
    assert "Two-factor sign-in is already on" in text
    assert "Your first click turned on two-factor sign-in" in text
    assert "shown only on the page that click opened" in text
    assert f'action="{reverse("recovery_codes_renew")}"' in text
    assert "Start again" not in text
    assert not any(code in text for code in first.context["codes"])
    assert set(RecoveryCode.objects.filter(user=user).values_list("digest", flat=True)) == digests
    assert TotpDevice.objects.get(user=user).confirmed
    assert AuditEvent.objects.filter(action="signin.two_factor_enrolled").count() == 1
    renewed = client.post(reverse("recovery_codes_renew"))
    assert renewed.status_code == 200 and len(renewed.context["codes"]) == 10


@pytest.mark.django_db(transaction=True)
def test_two_confirmations_at_the_same_moment_turn_it_on_once(tenant_a, member_of):
    """The second waits for the first's lock on the pending device and then finds it set up."""
    user = member_of(tenant_a, "approver").user
    device = two_factor.totp_begin(user=user)
    code = pyotp.TOTP(two_factor.totp_secret(device)).now()
    barrier = threading.Barrier(2)
    results = []

    def confirm():
        barrier.wait()
        try:
            results.append(len(two_factor.totp_confirm(user=user, code=code, device_id=device.pk)))
        except two_factor.TwoFactorError as error:
            results.append(error.code)
        finally:
            connection.close()

    threads = [threading.Thread(target=confirm) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted(results, key=str) == [10, "already_on"]
    assert RecoveryCode.objects.filter(user=user).count() == 10


def test_naming_another_persons_set_up_tells_nothing_about_it(tenant_a, member_of, password):
    """A user of two tenants or none: the set-up named is looked for among this person's own."""
    other = member_of(tenant_a, "approver").user
    device = two_factor.totp_begin(user=other)
    two_factor.totp_confirm(user=other, code=pyotp.TOTP(two_factor.totp_secret(device)).now())
    user = member_of(tenant_a, "viewer").user
    client = Client()
    client.post(reverse("login"), {"username": user.email, "password": password})

    answer = client.post(reverse("totp_confirm"), {"code": "123456", "setup": str(device.pk)})

    assert answer.status_code == 302 and answer["Location"] == reverse("account_security")
    assert "Start again" in client.get(answer["Location"]).content.decode()


@pytest.mark.parametrize("setup", ["9" * 40, "-1", "\x00", "\uff11\uff12", ""])
def test_an_odd_set_up_id_is_a_post_without_one(tenant_a, member_of, password, setup):
    user = member_of(tenant_a, "approver").user
    client = Client(raise_request_exception=False)
    client.post(reverse("login"), {"username": user.email, "password": password})
    secret, _fields = enrolment_page(client)
    code = pyotp.TOTP(secret).now()
    client.post(reverse("totp_confirm"), {"code": code})

    again = client.post(reverse("totp_confirm"), {"code": code, "setup": setup})

    assert again.status_code == 302 and again["Location"] == reverse("account_security")
