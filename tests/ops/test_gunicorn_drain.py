"""The web process drains on SIGTERM with the graceful timeout of our gunicorn config
(config/gunicorn.py, DEPLOYMENT.md "Stopping and restarting"): a request being served when the
stop arrives still gets its answer, and the master exits 0. The same request outliving a short
GUNICORN_GRACEFUL_TIMEOUT is cut, which shows the setting is ours."""

from __future__ import annotations

import signal
import socket
import sys
import time

import pytest
from django.urls import reverse

from scripts import devstack
from tests.servers import free_port, server_database_url, serving
from tests.webhooks.conftest import add_secret, new_secret
from webhooks.models import WebhookEndpoint

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]

BODY = b'{"type":"message.delivered","data":{}}'


def _webhook_path(tenant) -> str:
    endpoint = WebhookEndpoint.objects.create(
        tenant=tenant, status=WebhookEndpoint.Status.ACTIVE, provider_webhook_id="ep_drain"
    )
    add_secret(endpoint, new_secret())
    return reverse("webhooks_agentmail", kwargs={"endpoint_id": endpoint.public_id})


def _gunicorn() -> list[str]:
    """As DEPLOYMENT.md runs it: the config file, the rest from GUNICORN_* variables."""
    return [sys.executable, "-m", "gunicorn", "-c", "config/gunicorn.py", "config.wsgi"]


def _stopped_mid_request(tmp_path, tenant, *, graceful: int, body_after: float):
    """Start a request whose body arrives ``body_after`` s after SIGTERM: (answer, exit code)."""
    path = _webhook_path(tenant)
    port = free_port()
    env = {
        **devstack.child_env(),
        "DATABASE_URL": server_database_url("gunicorn-drain-test"),
        "GUNICORN_GRACEFUL_TIMEOUT": str(graceful),
        "GUNICORN_BIND": f"127.0.0.1:{port}",
        "GUNICORN_WORKERS": "1",
    }
    with serving(
        "web",
        _gunicorn(),
        env=env,
        log_path=tmp_path / "web.log",
        health_url=f"http://127.0.0.1:{port}/healthz",
    ) as proc:
        client = socket.create_connection(("127.0.0.1", port), timeout=30)
        head = (
            f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
            f"Content-Length: {len(BODY)}\r\nConnection: close\r\n\r\n"
        )
        # Half the body: the worker is inside the receiver, waiting to read the rest.
        client.sendall(head.encode() + BODY[:10])
        time.sleep(1.5)
        proc.send_signal(signal.SIGTERM)
        time.sleep(body_after)
        answer = b""
        try:
            client.sendall(BODY[10:])
            while chunk := client.recv(65536):
                answer += chunk
        except OSError:
            pass
        client.close()
        code = proc.wait(timeout=60)
    return answer, code


def test_sigterm_lets_the_request_in_flight_finish(tmp_path, tenant_a):
    answer, code = _stopped_mid_request(tmp_path, tenant_a, graceful=30, body_after=2)

    # The unsigned body is refused by the receiver: an answer, so the request ran to its end.
    assert answer.startswith(b"HTTP/1.1 400"), answer[:200]
    assert code == 0


def test_a_request_outliving_the_graceful_timeout_is_cut(tmp_path, tenant_a):
    answer, code = _stopped_mid_request(tmp_path, tenant_a, graceful=1, body_after=3)

    assert answer == b""
    assert code == 0
