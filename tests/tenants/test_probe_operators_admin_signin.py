"""An outsider's probe of the operators' admin's own sign-in and password pages.

Django's admin brings a sign-in form and a password-change form of its own. Its password form
checked the current password with ``check_password()``: wrong guesses were counted by neither
django-axes nor the client's budget, so whoever held an operator's session cookie could try
passwords there without end (the account page locks after ``AXES_FAILURE_LIMIT``), and a change
made there wrote no audit row. Its sign-in form signed operators in without ``signin.succeeded``.
Both now send to this site's own pages."""

import pytest
from django.test import Client
from django.urls import reverse

from tenants.models import AuditEvent, User

pytestmark = pytest.mark.django_db

OLD = "operator-pass-1-long"
NEW = "N3w-operator-passphrase"


@pytest.fixture
def operator():
    return User.objects.create_superuser("ops@countersign.test", OLD)


def test_the_admins_password_form_takes_no_guesses_past_the_sign_in_throttle(operator, settings):
    browser = Client()
    assert (
        browser.post(reverse("login"), {"username": operator.email, "password": OLD}).status_code
        == 302
    )
    for guess in range(settings.AXES_FAILURE_LIMIT + 1):
        browser.post(
            "/ops/admin/password_change/",
            {"old_password": f"wrong-{guess}", "new_password1": NEW, "new_password2": NEW},
        )

    found = browser.post(
        "/ops/admin/password_change/",
        {"old_password": OLD, "new_password1": NEW, "new_password2": NEW},
    )

    operator.refresh_from_db()
    assert operator.check_password(OLD)
    assert found.status_code == 302 and found["Location"] == reverse("password_change")


def test_the_admins_sign_in_form_signs_nobody_in_and_sends_to_the_sites(operator):
    browser = Client()

    answer = browser.post(
        "/ops/admin/login/?next=/ops/admin/", {"username": operator.email, "password": OLD}
    )

    assert "_auth_user_id" not in browser.session
    assert answer.status_code == 302
    assert answer["Location"] == f"{reverse('login')}?next=/ops/admin/"
    assert not AuditEvent.objects.filter(action="signin.succeeded").exists()


def test_a_signed_in_member_who_is_no_operator_is_refused_not_sent_round(
    tenant_a, member_of, password
):
    person = member_of(tenant_a, "admin").user
    browser = Client()
    browser.post(reverse("login"), {"username": person.email, "password": password})

    answer = browser.get("/ops/admin/", follow=True)

    assert answer.status_code == 403
    assert len(answer.redirect_chain) == 1
