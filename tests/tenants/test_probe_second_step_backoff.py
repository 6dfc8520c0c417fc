"""Found by a probe: someone who knows (phished) a person's password can fail the second step on
purpose. The back-off on wrong authenticator codes is per account (it must be: a limit per
client lets a botnet guess the 6 digits), so it holds for the real person too. Recovery codes and
passkeys cannot be guessed: they still sign the real person in while it holds."""

import re
from datetime import timedelta

import pytest
import time_machine
from django.test import Client
from django.urls import reverse
from django.utils import timezone

from tenants import two_factor
from tenants.models import AuditEvent, RecoveryCode, TotpDevice, User
from tests.tenants.test_passkeys import SoftPasskey, post_json
from tests.tenants.test_two_factor import enrol, next_step_code, password_sign_in

pytestmark = pytest.mark.django_db


@pytest.fixture
def enrolled(tenant_a, member_of, password):
    """(user, secret, recovery codes) of an approver who enrolled an authenticator app."""
    user = member_of(tenant_a, "approver").user
    client = Client()
    password_sign_in(client, user, password)
    secret, codes = enrol(client)
    return user, secret, codes


def wrong(code: str) -> str:
    return str((int(code) + 1) % 1_000_000).zfill(6)


def attacker_fails_the_code(user, secret, password) -> Client:
    attacker = Client()
    password_sign_in(attacker, user, password)
    refused = attacker.post(reverse("two_factor_verify"), {"code": wrong(next_step_code(secret))})
    assert refused.status_code == 400
    return attacker


def test_the_back_off_on_codes_holds_for_the_real_person_and_doubles(enrolled, password, settings):
    """The limit on guesses at the 6 digits stays per account (the same for every client)."""
    settings.OTP_TOTP_THROTTLE_FACTOR = 3600
    user, secret, _codes = enrolled
    attacker = attacker_fails_the_code(user, secret, password)
    person = Client()
    password_sign_in(person, user, password)

    held = person.post(reverse("two_factor_verify"), {"code": next_step_code(secret)})

    assert held.status_code == 400
    with time_machine.travel(timezone.now() + timedelta(hours=1, seconds=5)):
        assert (
            attacker.post(
                reverse("two_factor_verify"), {"code": wrong(next_step_code(secret))}
            ).status_code
            == 400
        )
        device = TotpDevice.objects.get(user=user)
        assert device.throttling_failure_count == 2
        assert device.verify_is_allowed()[1]["locked_until"] == (
            device.throttling_failure_timestamp + timedelta(hours=2)
        )


def test_a_recovery_code_signs_the_real_person_in_while_the_back_off_holds(
    enrolled, tenant_a, password, settings
):
    settings.OTP_TOTP_THROTTLE_FACTOR = 3600
    user, secret, codes = enrolled
    attacker_fails_the_code(user, secret, password)
    person = Client()
    password_sign_in(person, user, password)

    signed_in = person.post(reverse("two_factor_verify"), {"code": codes[0]})

    assert signed_in.status_code == 302
    assert person.get(reverse("tenant_home", args=[tenant_a.slug])).status_code == 200
    assert two_factor.recovery_codes_left(user) == 9
    # The back-off on the 6 digits is untouched: a recovery code is not a right code from the app.
    assert not TotpDevice.objects.get(user=user).verify_is_allowed()[0]


def test_a_passkey_signs_the_real_person_in_while_the_back_off_holds(
    enrolled, tenant_a, password, settings
):
    settings.OTP_TOTP_THROTTLE_FACTOR = 3600
    user, secret, _codes = enrolled
    passkey = SoftPasskey(user)
    attacker_fails_the_code(user, secret, password)
    person = Client()
    password_sign_in(person, user, password)
    options = person.post(reverse("passkey_signin_options")).json()
    credential = passkey.assert_(
        challenge=options["challenge"], origin="http://testserver", rp_id=options["rpId"]
    )

    signed_in = post_json(person, reverse("passkey_signin"), {"credential": credential})

    assert signed_in.status_code == 200
    assert person.get(reverse("tenant_home", args=[tenant_a.slug])).status_code == 200


def test_the_throttled_answer_says_how_long_and_what_still_works(enrolled, password, settings):
    settings.OTP_TOTP_THROTTLE_FACTOR = 3600
    user, secret, _codes = enrolled
    attacker = attacker_fails_the_code(user, secret, password)

    held = attacker.post(reverse("two_factor_verify"), {"code": next_step_code(secret)})

    assert held.status_code == 400
    text = held.content.decode()
    assert "Wait a few seconds" not in text
    assert "try again in 59" in text and "recovery code" in text


@pytest.mark.parametrize(
    ("codes_left", "passkey", "way_out"),
    [
        (True, True, ", or use a recovery code or a passkey."),
        (True, False, ", or use a recovery code."),
        (False, True, ", or use a passkey."),
        (False, False, "."),
    ],
)
def test_the_throttled_answer_offers_only_what_the_person_has(
    enrolled, password, settings, codes_left, passkey, way_out
):
    """Found by a probe: it offered "a recovery code or a passkey" to everyone, to a person
    with no passkey, or with every recovery code used, too: they looked for what they lacked."""
    settings.OTP_TOTP_THROTTLE_FACTOR = 3600
    user, secret, _codes = enrolled
    if not codes_left:
        RecoveryCode.objects.filter(user=user).update(used_at=timezone.now())
    if passkey:
        SoftPasskey(user)
    attacker = attacker_fails_the_code(user, secret, password)

    held = attacker.post(reverse("two_factor_verify"), {"code": next_step_code(secret)})

    text = held.content.decode()
    told = re.search(r"Too many wrong codes from the app: try again in 59\s+minutes?([^<]*)<", text)
    assert told is not None
    assert told[1] == way_out


def test_wrong_recovery_codes_have_a_back_off_of_their_own_that_stays_short(
    enrolled, tenant_a, password
):
    """A recovery code (10 letters and digits of 31) cannot be guessed, but guesses at it are
    still slowed, per account; the wait stops growing at a minute, so that a stranger who spends
    the night on wrong ones keeps the real person waiting a minute at most."""
    user, _secret, codes = enrolled
    attacker = Client()
    password_sign_in(attacker, user, password)
    start = timezone.now()
    for minute in range(12):
        with time_machine.travel(start + timedelta(seconds=61 * minute)):
            refused = attacker.post(reverse("two_factor_verify"), {"code": "guess-guess"})
            assert refused.status_code == 400
            assert "not right" in refused.content.decode()
    person = Client()
    password_sign_in(person, user, password)
    with time_machine.travel(start + timedelta(seconds=61 * 11 + 5)):
        held = person.post(reverse("two_factor_verify"), {"code": codes[0]})
        assert held.status_code == 400
        assert two_factor.recovery_codes_left(user) == 10
    with time_machine.travel(start + timedelta(seconds=61 * 12 + 1)):
        signed_in = person.post(reverse("two_factor_verify"), {"code": codes[0]})
    assert signed_in.status_code == 302
    # Wrong recovery codes do not lengthen the back-off on the 6 digits.
    assert TotpDevice.objects.get(user=user).throttling_failure_count == 0


def warnings_on(response) -> list[str]:
    return [str(m) for m in response.wsgi_request._messages]


def test_the_person_is_told_at_their_next_sign_in_that_their_password_was_used(
    enrolled, tenant_a, password
):
    """Nobody told the person: the failed codes were rows in the tenants' audit logs, which an
    admin may read and the person may not. Their next sign-in says so, once, with where from."""
    user, _secret, codes = enrolled
    attacker = Client(REMOTE_ADDR="203.0.113.66")
    password_sign_in(attacker, user, password)
    for guess in ("000000", "guess-guess", "111111"):
        attacker.post(reverse("two_factor_verify"), {"code": guess})
    person = Client()
    password_sign_in(person, user, password)

    with time_machine.travel(timezone.now() + timedelta(minutes=1)):  # past the back-offs
        signed_in = person.post(reverse("two_factor_verify"), {"code": codes[0]}, follow=True)

    told = [m for m in warnings_on(signed_in) if "change your password" in m]
    assert len(told) == 1
    assert "3 times by" in told[0] and "203.0.113.66" in told[0]
    row = AuditEvent.objects.get(action="signin.second_step_failures_shown", tenant=tenant_a)
    assert row.data == {"email": user.email, "failures": 3}
    again = Client()
    password_sign_in(again, user, password)
    later = again.post(reverse("two_factor_verify"), {"code": codes[1]}, follow=True)
    assert later.status_code == 200
    assert not [m for m in warnings_on(later) if "change your password" in m]


def test_a_passkey_sign_in_tells_it_too_and_ones_own_typo_is_not_news(enrolled, tenant_a, password):
    user, _secret, _codes = enrolled
    passkey = SoftPasskey(user)
    attacker = Client(REMOTE_ADDR="203.0.113.66")
    password_sign_in(attacker, user, password)
    attacker.post(reverse("two_factor_verify"), {"code": "000000"})
    person = Client()
    password_sign_in(person, user, password)
    assert person.post(reverse("two_factor_verify"), {"code": "guess-guess"}).status_code == 400
    options = person.post(reverse("passkey_signin_options")).json()
    credential = passkey.assert_(
        challenge=options["challenge"], origin="http://testserver", rp_id=options["rpId"]
    )

    assert (
        post_json(person, reverse("passkey_signin"), {"credential": credential}).status_code == 200
    )

    page = person.get(reverse("account_security"))
    told = [m for m in warnings_on(page) if "change your password" in m]
    assert len(told) == 1 and "1 time by" in told[0]


def test_a_wrong_code_when_confirming_it_is_you_is_not_a_stranger_with_the_password(
    enrolled, password
):
    """tenants.sudo asks a signed-in session for a code again; a wrong one there is that
    session's, not someone's half sign-in."""
    user, _secret, codes = enrolled
    client = Client()
    password_sign_in(client, user, password)
    client.post(reverse("two_factor_verify"), {"code": codes[0]})
    client.post(reverse("account_confirm"), {"code": "000000"})
    assert User.objects.get(pk=user.pk).second_step_failures == 0


def test_a_new_password_ends_the_back_off_the_old_one_let_someone_build(
    enrolled, tenant_a, password, settings
):
    """The back-off on the 6 digits was built by whoever held the password. Once the person has
    changed it, that guesser cannot reach the second step any more, and the person's own app
    must work again at once, not in hours (a recovery code each time until then)."""
    from tests.tenants.test_passwords import NEW, change

    settings.OTP_TOTP_THROTTLE_FACTOR = 3600
    user, secret, codes = enrolled
    attacker = attacker_fails_the_code(user, secret, password)
    person = Client()
    password_sign_in(person, user, password)
    assert person.post(reverse("two_factor_verify"), {"code": codes[0]}).status_code == 302

    assert change(person, password).status_code == 302

    assert attacker.post(reverse("two_factor_verify"), {"code": "000000"}).status_code != 200
    later = Client()
    password_sign_in(later, user, NEW)
    signed_in = later.post(reverse("two_factor_verify"), {"code": next_step_code(secret)})
    assert signed_in.status_code == 302
    assert later.get(reverse("tenant_home", args=[tenant_a.slug])).status_code == 200
    row = AuditEvent.objects.get(action="signin.password_changed", tenant=tenant_a)
    assert row.data["second_step_back_off_ended"] is True


def test_an_operator_setting_a_password_ends_the_back_off_too(enrolled, password, settings):
    from tenants.passwords import password_set_by_operator

    settings.OTP_TOTP_THROTTLE_FACTOR = 3600
    user, secret, _codes = enrolled
    attacker_fails_the_code(user, secret, password)

    password_set_by_operator(user=user, password="an-operator-chose-this-77")

    device = TotpDevice.objects.get(user=user)
    assert device.verify_is_allowed()[0]
    assert device.throttling_failure_count == 0 and device.recovery_failure_count == 0
