"""An operator (staff) opens the operators' admin, which acts on every tenant: with
``OPERATORS_REQUIRE_TWO_FACTOR`` on (production's default), a password alone is not enough. An
operator without a second factor is sent to the security page, which says why; one with a factor
proves it in this session first; once enrolled here, the admin opens."""

import pyotp
import pytest
from django.test import Client
from django.urls import reverse

from tenants.models import User
from tests.tenants.test_settings import PRODUCTION_ENV, run_python

pytestmark = pytest.mark.django_db

PASSWORD = "operator-pass-1-long"


@pytest.fixture(autouse=True)
def _no_throttle_delay(settings):
    settings.OTP_TOTP_THROTTLE_FACTOR = 0


@pytest.fixture
def operator():
    return User.objects.create_superuser("ops@countersign.test", PASSWORD)


def _signed_in(operator) -> Client:
    browser = Client()
    answer = browser.post(reverse("login"), {"username": operator.email, "password": PASSWORD})
    assert answer.status_code == 302
    return browser


def test_an_operator_with_a_password_alone_is_sent_to_enrol(operator, settings):
    settings.OPERATORS_REQUIRE_TWO_FACTOR = True
    browser = _signed_in(operator)

    answer = browser.get("/ops/admin/tenants/tenant/")

    assert answer.status_code == 302
    assert answer["Location"] == reverse("account_security")
    page = browser.get(answer["Location"])
    assert "The operators' admin needs two-factor sign-in" in page.content.decode()


def test_an_operator_with_a_password_alone_changes_nothing_there(operator, settings):
    settings.OPERATORS_REQUIRE_TWO_FACTOR = True
    browser = _signed_in(operator)

    answer = browser.post("/ops/admin/tenants/user/add/", {"email": "new@countersign.test"})

    assert answer.status_code == 403
    assert not User.objects.filter(email="new@countersign.test").exists()


def test_the_rest_of_the_site_stays_open_to_an_operator_without_a_factor(operator, settings):
    settings.OPERATORS_REQUIRE_TWO_FACTOR = True
    browser = _signed_in(operator)

    assert browser.get(reverse("preferences")).status_code == 200


def test_once_enrolled_in_this_session_the_admin_opens(operator, settings):
    settings.OPERATORS_REQUIRE_TWO_FACTOR = True
    browser = _signed_in(operator)
    secret = browser.post(reverse("totp_enrol")).context["secret"]
    browser.post(reverse("totp_confirm"), {"code": pyotp.TOTP(secret).now()})

    assert browser.get("/ops/admin/tenants/tenant/").status_code == 200

    # A new session with the password alone owes the factor before the admin opens.
    again = _signed_in(operator)
    answer = again.get("/ops/admin/tenants/tenant/")
    assert answer.status_code == 302
    assert answer["Location"].startswith(reverse("two_factor_verify"))


def test_with_the_setting_off_a_password_is_enough(operator, settings):
    settings.OPERATORS_REQUIRE_TWO_FACTOR = False
    browser = _signed_in(operator)

    assert browser.get("/ops/admin/tenants/tenant/").status_code == 200


def test_production_requires_it_unless_told_otherwise():
    read = "from config import settings; print(settings.OPERATORS_REQUIRE_TWO_FACTOR)"
    env = {**PRODUCTION_ENV, "DATABASE_URL": "postgres://cs@db.internal/cs"}
    assert run_python("-c", read, env=env).stdout.strip() == "True"
    off = {**env, "OPERATORS_REQUIRE_TWO_FACTOR": "false"}
    assert run_python("-c", read, env=off).stdout.strip() == "False"
