"""A signed-in person changes their own password on the account pages: the current password
first (throttled as at sign-in), Django's validators, an audit row, and every other session of
theirs ended while this one stays signed in. (A single sign-on session may not: test_sso_account_
guard.py. In a browser: tests/ui/test_browser_password.py.)"""

import pytest
from axes.models import AccessAttempt
from django.conf import settings
from django.contrib.sessions.models import Session
from django.test import Client
from django.urls import reverse

from tenants.models import AuditEvent, UserSession

pytestmark = pytest.mark.django_db

NEW = "a-fresh-pass-phrase-58"


def browser(user, password, ip="10.2.0.1"):
    client = Client(REMOTE_ADDR=ip)
    response = client.post(reverse("login"), {"username": user.email, "password": password})
    assert response.status_code == 302
    return client


def change(client, old, new=NEW, again=None):
    return client.post(
        reverse("password_change"),
        {"old_password": old, "new_password1": new, "new_password2": again or new},
    )


def test_the_account_pages_link_to_it(tenant_a, member_of, password):
    client = browser(member_of(tenant_a).user, password)
    link = f'href="{reverse("password_change")}"'

    assert link in client.get(reverse("account_security")).content.decode()
    assert link in client.get(reverse("sessions")).content.decode()
    assert client.get(reverse("password_change")).status_code == 200


def test_changing_it_ends_the_other_sessions_and_keeps_this_one(tenant_a, member_of, password):
    user = member_of(tenant_a).user
    other = browser(user, password, ip="10.2.0.2")
    other_key = other.session.session_key
    client = browser(user, password)
    before = client.session.session_key

    response = change(client, password)

    assert response.status_code == 302 and response["Location"] == reverse("sessions")
    user.refresh_from_db()
    assert user.check_password(NEW)
    assert client.session.session_key != before
    assert client.get(reverse("tenant_home", args=[tenant_a.slug])).status_code == 200
    assert other.get(reverse("tenant_home", args=[tenant_a.slug])).status_code == 302
    assert not Session.objects.filter(session_key__in=[before, other_key]).exists()
    assert list(UserSession.objects.filter(user=user).values_list("session_key", flat=True)) == [
        client.session.session_key
    ]
    row = AuditEvent.objects.get(action="signin.password_changed", tenant=tenant_a)
    assert row.data == {"email": user.email, "sessions_ended": 1}
    assert NEW not in str(row.data) and password not in str(row.data)
    assert (
        Client().post(reverse("login"), {"username": user.email, "password": NEW}).status_code
        == 302
    )


def test_a_wrong_current_password_changes_nothing(tenant_a, member_of, password):
    user = member_of(tenant_a).user
    client = browser(user, password)

    response = change(client, "not-the-password")

    assert response.status_code == 400
    assert "Your old password was entered incorrectly" in response.content.decode()
    user.refresh_from_db()
    assert user.check_password(password)
    assert AuditEvent.objects.filter(action="signin.failed", tenant=tenant_a).count() == 1
    assert not AuditEvent.objects.filter(action="signin.password_changed").exists()


def test_a_wrong_current_password_leaves_no_password_or_form_token_in_the_throttle_rows(
    tenant_a, member_of, password
):
    """django-axes keeps the form of each failed authenticate() (``post_data``, shown in the
    operators' admin) and masked only ``password``: a mistyped current password kept it, the new
    password twice and the CSRF form token in clear."""
    user = member_of(tenant_a).user
    client = browser(user, password)
    typo, form_token = password + "x", "csrf-form-token-7d1e3b9a"

    response = client.post(
        reverse("password_change"),
        {
            "old_password": typo,
            "new_password1": NEW,
            "new_password2": NEW,
            "csrfmiddlewaretoken": form_token,
        },
    )

    assert response.status_code == 400
    kept = AccessAttempt.objects.get(username=user.email)
    assert "new_password1=" in kept.post_data
    for secret in (typo, NEW, form_token):
        assert secret not in kept.post_data


def test_the_validators_refuse_a_weak_or_mismatched_new_password(tenant_a, member_of, password):
    user = member_of(tenant_a).user
    client = browser(user, password)

    weak = change(client, password, new="short")
    mismatched = change(client, password, new=NEW, again=NEW + "x")

    assert (weak.status_code, mismatched.status_code) == (400, 400)
    user.refresh_from_db()
    assert user.check_password(password)


def test_wrong_current_passwords_are_throttled_like_sign_in(tenant_a, member_of, password):
    """The page would otherwise be a way around the sign-in throttle for whoever holds a
    signed-in browser: the same counter (address and client) and the same lockout."""
    user = member_of(tenant_a).user
    client = browser(user, password)
    for _ in range(settings.AXES_FAILURE_LIMIT):
        change(client, "not-the-password")

    locked = change(client, password)

    assert locked.status_code == 429
    user.refresh_from_db()
    assert user.check_password(password)
    signing_in = Client(REMOTE_ADDR="10.2.0.1").post(
        reverse("login"), {"username": user.email, "password": password}
    )
    assert signing_in.status_code == 429


def test_it_needs_a_signed_in_person_and_a_csrf_token(tenant_a, member_of, password):
    user = member_of(tenant_a).user
    anonymous = Client().get(reverse("password_change"))
    strict = Client(enforce_csrf_checks=True)
    strict.force_login(user)

    forged = strict.post(
        reverse("password_change"),
        {"old_password": password, "new_password1": NEW, "new_password2": NEW},
    )

    assert anonymous.status_code == 302 and anonymous["Location"].startswith(reverse("login"))
    assert forged.status_code == 403
    user.refresh_from_db()
    assert user.check_password(password)


def test_an_operator_setting_one_by_command_ends_their_sessions_and_tells_each_tenant(
    tenant_a, tenant_b, member_of, password, monkeypatch
):
    """``manage.py changepassword`` (the README's way for a person who forgot theirs) was
    Django's own: it found no address typed in another case, left no audit row in any tenant of
    the person, and whoever held their sessions stayed signed in."""
    import getpass
    import io

    from django.core.management import call_command

    user = member_of(tenant_a).user
    member_of(tenant_b, "viewer", user=user)
    theirs = browser(user, password)
    monkeypatch.setattr(getpass, "getpass", lambda prompt="": NEW)
    out = io.StringIO()

    call_command("changepassword", user.email.upper(), stdout=out)

    user.refresh_from_db()
    assert user.check_password(NEW)
    assert "ended 1 session(s)" in out.getvalue()
    assert theirs.get(reverse("tenant_home", args=[tenant_a.slug])).status_code == 302
    rows = AuditEvent.objects.filter(action="signin.password_operator_set")
    assert sorted(rows.values_list("tenant_id", "object_id", "data")) == [
        (tenant.pk, str(user.pk), {"email": user.email, "sessions_ended": 1})
        for tenant in (tenant_a, tenant_b)
    ]


def test_the_migration_masks_the_password_page_rows_written_before_and_leaves_sign_in_rows():
    """Rows axes wrote before it masked the password page's fields (tenants/migrations/0013)."""
    import importlib

    from axes.models import AccessAttempt
    from django.apps import apps

    migration = importlib.import_module("tenants.migrations.0013_mask_passwords_in_axes_rows")
    common = {"user_agent": "ua", "ip_address": "127.0.0.1", "http_accept": "*", "path_info": "/"}
    page = AccessAttempt.objects.create(
        username="ana@example.com",
        post_data="csrfmiddlewaretoken=Tk83fQ\nold_password=wrong\nnew_password1=New secret\nline2\n"
        "new_password2=New secret",
        failures_since_start=1,
        **common,
    )
    sign_in = AccessAttempt.objects.create(
        username="ben@example.com",
        post_data="username=ben@example.com\npassword=********************",
        failures_since_start=1,
        **common,
    )

    migration.mask_password_page_rows(apps, None)

    page.refresh_from_db()
    sign_in.refresh_from_db()
    assert "wrong" not in page.post_data and "New secret" not in page.post_data
    assert "Tk83fQ" not in page.post_data and "line2" not in page.post_data
    assert page.post_data.splitlines() == [
        f"{key}=********************"
        for key in ("csrfmiddlewaretoken", "old_password", "new_password1", "new_password2")
    ]
    assert sign_in.post_data == "username=ben@example.com\npassword=********************"
