import pytest
from django.conf import settings
from django.urls import reverse
from django.utils.http import url_has_allowed_host_and_scheme

from tenants.models import AuditEvent
from tenants.signin_audit import client_ip

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
    assert "Sign-in for this account from your address is paused" in locked.content.decode()
    assert "_auth_user_id" not in client.session
    elsewhere = sign_in(client, email, password, "10.0.0.2")
    assert elsewhere.status_code == 302


def via_proxy(client, email, password, forwarded_for):
    """A sign-in through one reverse proxy at 10.9.9.9 that appends the client's address."""
    return client.post(
        reverse("login"),
        {"username": email, "password": password},
        REMOTE_ADDR="10.9.9.9",
        HTTP_X_FORWARDED_FOR=forwarded_for,
    )


def test_behind_a_proxy_the_throttle_locks_the_client_not_the_proxy(
    client, tenant_a, member_of, password, settings
):
    """Everyone arrives from the proxy's address: without TRUSTED_PROXY_COUNT one stranger's
    five wrong passwords locked the person out for every client. The address a client writes in
    the header itself (left of what the proxy appended) is not believed."""
    settings.TRUSTED_PROXY_COUNT = 1
    email = member_of(tenant_a).user.email
    for _ in range(settings.AXES_FAILURE_LIMIT):
        via_proxy(client, email, "wrong-password", "198.51.100.7, 203.0.113.66")
    assert via_proxy(client, email, password, "203.0.113.66").status_code == 429
    assert via_proxy(client, email, password, "203.0.113.66, 198.51.100.7").status_code == 302
    row = AuditEvent.objects.filter(action="signin.succeeded").latest("pk")
    assert row.ip_address == "198.51.100.7"


@pytest.mark.parametrize(
    ("count", "forwarded", "seen"),
    [
        (0, "203.0.113.66", "10.9.9.9"),
        (1, "", "10.9.9.9"),
        (1, "not-an-address", "10.9.9.9"),
        (1, "192.0.2.1, 203.0.113.66", "203.0.113.66"),
        (2, "192.0.2.1, 203.0.113.66, 10.8.8.8", "203.0.113.66"),
        (2, "203.0.113.66", "10.9.9.9"),
    ],
)
def test_the_client_address_is_the_one_the_nearest_trusted_proxy_saw(
    rf, settings, count, forwarded, seen
):
    settings.TRUSTED_PROXY_COUNT = count
    request = rf.get("/", REMOTE_ADDR="10.9.9.9", HTTP_X_FORWARDED_FOR=forwarded)
    assert client_ip(request) == seen


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


# --- "next": never off the site, never from https down to http ---------------------------------

OFF_SITE = [
    "//evil.example/",
    "https://evil.example/",
    "/\\evil.example/",
    "\\\\evil.example",
    "http:evil.example",
    "/%2F%2Fevil.example",
    " //evil.example",
    "\t//evil.example",
    "javascript:alert(1)",
    "https:///evil.example",
]


def _stays_on_site(response, *, secure: bool = False) -> bool:
    location = response["Location"]
    return url_has_allowed_host_and_scheme(
        location, allowed_hosts={"testserver"}, require_https=secure
    ) and not location.lower().startswith("javascript")


@pytest.mark.parametrize("target", OFF_SITE)
def test_sign_in_next_never_leaves_the_site(client, tenant_a, member_of, password, target):
    membership = member_of(tenant_a)
    response = client.post(
        reverse("login") + "?next=" + target,
        {"username": membership.user.email, "password": password, "next": target},
    )
    assert response.status_code == 302
    assert _stays_on_site(response)


def test_sign_in_over_https_never_sends_on_over_http(client, tenant_a, member_of, password):
    membership = member_of(tenant_a)
    target = f"http://testserver/t/{tenant_a.slug}/"
    response = client.post(
        reverse("login"),
        {"username": membership.user.email, "password": password, "next": target},
        secure=True,
    )
    assert response.status_code == 302
    assert _stays_on_site(response, secure=True)


@pytest.mark.parametrize("target", OFF_SITE)
def test_sign_out_next_never_leaves_the_site(signed_in, tenant_a, member_of, target):
    client = signed_in(member_of(tenant_a).user)
    response = client.post(reverse("logout") + "?next=" + target, {"next": target})
    assert response.status_code == 302
    assert _stays_on_site(response)


def test_an_address_too_long_for_any_account_is_a_form_error_not_a_500(client, db):
    """Found by an outside probe: the form took addresses over 254 characters, and django-axes
    then wrote one into its 255-character column: a database error (500), no throttle."""
    email = "a" * 60 + "@" + ".".join(["b" * 60] * 4) + ".test"

    responses = [
        sign_in(client, email, "wrong-wrong-wrong", "10.0.0.1")
        for _ in range(settings.AXES_FAILURE_LIMIT + 1)
    ]

    assert {response.status_code for response in responses} == {200}
    assert "at most 254 characters" in responses[-1].content.decode()
    assert "_auth_user_id" not in client.session
