"""The provider's webhooks reach their view through ``MACHINE_MIDDLEWARE`` only (config.machine),
in production (``config.wsgi``) and in the suite's client alike; every other path keeps the full
browser chain."""

from __future__ import annotations

import io
import json
import sys

import pytest
from django.core.exceptions import ImproperlyConfigured
from django.urls import reverse

from config.machine import MachineHandler
from config.wsgi import application
from tests.webhooks.conftest import new_svix_id
from webhooks.models import WebhookEvent

# Through the real WSGI handler, whose request signals close the connection: no wrapping transaction.
pytestmark = pytest.mark.django_db(transaction=True)


def call(
    path: str,
    *,
    method: str = "GET",
    body: bytes = b"",
    headers: dict | None = None,
    with_body: bool = False,
):
    """One request through ``config.wsgi.application``, as gunicorn makes it: (status, headers),
    and the body too ``with_body``."""
    environ = {
        "REQUEST_METHOD": method,
        "PATH_INFO": path,
        "SCRIPT_NAME": "",
        "QUERY_STRING": "",
        "SERVER_NAME": "testserver",
        "SERVER_PORT": "80",
        "SERVER_PROTOCOL": "HTTP/1.1",
        "REMOTE_ADDR": "127.0.0.1",
        "CONTENT_LENGTH": str(len(body)),
        "CONTENT_TYPE": "application/json",
        "wsgi.input": io.BytesIO(body),
        "wsgi.url_scheme": "http",
        "wsgi.errors": sys.stderr,
        "wsgi.multithread": False,
        "wsgi.multiprocess": True,
        "wsgi.run_once": False,
        "wsgi.version": (1, 0),
    }
    for name, value in (headers or {}).items():
        environ["HTTP_" + name.upper().replace("-", "_")] = value
    answer: dict = {}

    def start_response(status, response_headers, exc_info=None):
        answer["status"] = int(status.split()[0])
        answer["headers"] = response_headers

    chunks = application(environ, start_response)
    try:
        content = b"".join(chunks)
    finally:
        chunks.close()
    if with_body:
        return answer["status"], answer["headers"], content
    return answer["status"], answer["headers"]


def names(headers) -> set[str]:
    return {name.lower() for name, _ in headers}


def vary(headers) -> str:
    return ", ".join(value for name, value in headers if name.lower() == "vary")


def test_a_delivery_through_wsgi_is_stored_and_skips_the_browser_chain(hook_for, tenant_a):
    hook = hook_for(tenant_a)
    svix_id = new_svix_id()
    body = json.dumps({"event_type": "message.received", "event_id": "evt_1"}).encode()
    status, headers = call(
        hook.url, method="POST", body=body, headers=hook.headers(body, svix_id=svix_id)
    )
    assert status == 200
    assert WebhookEvent.objects.filter(svix_id=svix_id, endpoint=hook.endpoint).count() == 1
    # The security middleware ran; nothing of the browser's did (no session cookie, no language,
    # no Content-Security-Policy for a JSON answer, no Vary on Cookie or Accept-Language).
    assert ("X-Content-Type-Options", "nosniff") in headers
    assert not names(headers) & {"set-cookie", "content-language", "content-security-policy"}
    assert vary(headers) == ""


def test_a_page_through_wsgi_keeps_the_full_chain():
    status, headers = call(reverse("login"))
    assert status == 200
    assert {"content-security-policy", "set-cookie", "x-frame-options"} <= names(headers)
    assert "Cookie" in vary(headers)


def test_an_unknown_path_under_the_prefix_is_a_404_not_an_error():
    status, _ = call("/webhooks/agentmail/not-a-uuid/", method="POST")
    assert status == 404
    status, _ = call("/webhooks/.." + reverse("login"))
    assert status == 404


@pytest.mark.parametrize(
    ("method", "path"),
    [
        ("GET", "/webhooks/"),
        ("POST", "/webhooks/agentmail/not-a-uuid/"),
        ("POST", "/webhooks/agentmail/0b5e4a52-0d8c-4d7e-9f3e-1f6a2b7c9d01"),
        ("GET", "/webhooks/anything/at/all"),
    ],
)
def test_a_path_under_the_prefix_that_names_no_route_answers_like_an_unknown_endpoint(method, path):
    """Found by an outside probe: a path under /webhooks/ that matched no route answered the staff
    UI's HTML 404 page, rendered on the short chain: no Content-Security-Policy (its scripts
    carried nonce="None"), no X-Frame-Options (frameable), a fresh CSRF cookie and token. It
    answers what an unknown endpoint id answers, the receiver's problem+json."""
    status, headers, body = call(path, method=method, with_body=True)
    _, _, unknown = call(
        "/webhooks/agentmail/0b5e4a52-0d8c-4d7e-9f3e-1f6a2b7c9d01/", method="POST", with_body=True
    )
    assert status == 404
    assert dict(headers)["Content-Type"] == "application/problem+json"
    assert json.loads(body) == json.loads(unknown)
    assert ("X-Content-Type-Options", "nosniff") in headers
    assert "set-cookie" not in names(headers)
    assert vary(headers) == ""


def test_a_host_outside_allowed_hosts_is_refused_on_the_short_chain_too(hook_for, tenant_a):
    hook = hook_for(tenant_a)
    svix_id = new_svix_id()
    body = json.dumps({"event_type": "message.received", "event_id": "evt_h"}).encode()
    headers = {**hook.headers(body, svix_id=svix_id), "Host": "attacker.example"}
    status, _ = call(hook.url, method="POST", body=body, headers=headers)
    assert status == 400
    assert not WebhookEvent.objects.filter(svix_id=svix_id).exists()


def test_the_suite_client_routes_webhooks_as_production_does(client, hook_for, tenant_a):
    hook = hook_for(tenant_a)
    response = hook.post(client, {"event_type": "message.received", "event_id": "e"}, apply=False)
    assert response.status_code == 200
    assert "Vary" not in response.headers
    assert not hasattr(response.wsgi_request, "session")


def test_middleware_with_hooks_the_machine_handler_cannot_run_is_refused(settings):
    settings.MACHINE_MIDDLEWARE = [
        "django.middleware.security.SecurityMiddleware",
        "django.middleware.csrf.CsrfViewMiddleware",
    ]
    with pytest.raises(ImproperlyConfigured, match="CsrfViewMiddleware has process_view"):
        MachineHandler()
