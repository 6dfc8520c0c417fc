import pytest
from django.conf import settings
from django.urls import reverse

pytestmark = pytest.mark.django_db


def sign_in(client, email, password, ip):
    return client.post(reverse("login"), {"username": email, "password": password}, REMOTE_ADDR=ip)


def test_sign_in_and_out(client, tenant_a, member_of, password):
    membership = member_of(tenant_a, "approver")
    response = sign_in(client, membership.user.email, password, "10.0.0.1")
    assert response.status_code == 302
    assert client.get(reverse("tenant_home", args=[tenant_a.slug])).status_code == 200
    client.post(reverse("logout"))
    assert client.get(reverse("tenant_home", args=[tenant_a.slug])).status_code == 302


def test_wrong_password_says_so_and_signs_nobody_in(client, tenant_a, member_of):
    membership = member_of(tenant_a)
    response = sign_in(client, membership.user.email, "wrong-password", "10.0.0.1")
    assert response.status_code == 200
    assert b"correct email" in response.content
    assert "_auth_user_id" not in client.session


def test_throttle_trips_then_other_address_still_works(client, tenant_a, member_of, password):
    membership = member_of(tenant_a)
    email = membership.user.email
    for _ in range(settings.AXES_FAILURE_LIMIT):
        sign_in(client, email, "wrong-password", "10.0.0.1")
    locked = sign_in(client, email, password, "10.0.0.1")
    assert locked.status_code == 429
    assert "_auth_user_id" not in client.session
    elsewhere = sign_in(client, email, password, "10.0.0.2")
    assert elsewhere.status_code == 302


def test_session_cookie_flags(client, tenant_a, member_of, password):
    membership = member_of(tenant_a)
    response = sign_in(client, membership.user.email, password, "10.0.0.3")
    cookie = response.cookies[settings.SESSION_COOKIE_NAME]
    assert cookie["httponly"]
    assert cookie["samesite"] == "Lax"


def test_pages_carry_a_strict_csp_with_a_fresh_nonce(client):
    first = client.get(reverse("login"))["Content-Security-Policy"]
    second = client.get(reverse("login"))["Content-Security-Policy"]
    assert "script-src 'self' 'nonce-" in first
    assert "unsafe-inline" not in first and "unsafe-eval" not in first
    assert first != second
