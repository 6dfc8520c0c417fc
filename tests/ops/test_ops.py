import json
import subprocess
import sys

import pytest
from django.core.management import call_command

from config import ops
from reliability.cluster import daemons
from tests.ops.live import ROOT, process_env
from tests.raw_server import RawReceiver

pytestmark = pytest.mark.django_db

PROBE = (
    "from django.test import Client; c = Client(HTTP_HOST='localhost'); "
    "print('probe', c.get('/healthz').status_code, c.get('/readyz').status_code); "
    "print('probe', c.get('/readyz').content.decode())"
)


def test_healthz(client):
    response = client.get("/healthz")
    assert response.status_code == 200
    assert response.json() == {"status": "ok"}


def test_readyz_checks_database_and_broker(client):
    response = client.get("/readyz")
    assert response.status_code == 200
    assert response.json()["checks"] == {
        "database": "ok",
        "migrations": "ok",
        "cache": "ok",
        "broker": "ok",
    }


@pytest.fixture
def database_cache(settings, monkeypatch):
    """Production's cache (settings.CACHES): a table in the database, not made by ``migrate``
    (DEPLOYMENT.md: ``createcachetable`` once per release). This one is not made yet; the
    test's transaction takes back the one the test makes."""
    monkeypatch.setattr(ops, "_cache_tables_found", False)
    settings.CACHES = {
        "default": {
            "BACKEND": "django.core.cache.backends.db.DatabaseCache",
            "LOCATION": "probe_cache_not_made",
        }
    }


def test_readyz_is_not_ready_while_the_cache_table_is_missing(database_cache, client):
    """Found by an outside probe of a production deployment: with ``createcachetable`` not run
    (a new database, a restore), the queue and every draft page answered 500 (the reviewers'
    content marks are kept in the cache) while /readyz said ready, so a load balancer sent
    users to it."""
    response = client.get("/readyz")
    assert response.status_code == 503
    assert response.json()["checks"] == {
        "database": "ok",
        "migrations": "ok",
        "cache": "error: the cache table probe_cache_not_made does not exist; run manage.py "
        "createcachetable",
        "broker": "ok",
    }
    call_command("createcachetable", verbosity=0)
    response = client.get("/readyz")
    assert response.status_code == 200
    assert response.json()["checks"]["cache"] == "ok"


def test_with_the_database_down_the_process_is_live_but_not_ready():
    """DEPLOYMENT.md "Watching it", with a real refused connection (a port just freed): /healthz
    200, /readyz 503 naming the database, and saying the migrations and the broker (the ORM
    broker is that database) were not asked; the URL's password reaches neither the answer nor
    the log."""
    url = f"postgresql://cs:hunter2-secret@127.0.0.1:{daemons.free_port()}/cs"
    done = subprocess.run(
        [sys.executable, "manage.py", "shell", "-v", "0", "-c", PROBE],
        cwd=ROOT,
        env=process_env(DATABASE_URL=url, LOG_LEVEL="INFO"),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        timeout=60,
    )
    lines = [line[6:] for line in done.stdout.splitlines() if line.startswith("probe ")]
    assert lines[0] == "200 503"
    assert json.loads(lines[1]) == {
        "status": "not ready",
        "checks": {
            "database": "error: OperationalError",
            "migrations": "error: not checked, the database did not answer",
            "cache": "ok",
            "broker": "error: not checked, the database did not answer",
        },
    }
    assert "hunter2" not in done.stdout


READY_PROBE = (
    "from django.test import Client; c = Client(HTTP_HOST='localhost'); "
    "print('probe', c.get('/readyz').content.decode())"
)


def test_with_the_database_silent_readyz_asks_it_once():
    """Found by probe 4 (the operator): with PostgreSQL's host taking connections and saying
    nothing (a partition, a hung server or proxy), /readyz opened a connection for the database,
    then again for the migrations and for the ORM broker, each waiting out DB_CONNECT_TIMEOUT:
    30 s a probe by default, a web worker held for each, where a load balancer gives up after a
    few. The checks that need the database now say they were not asked."""
    server = RawReceiver(lambda receiver, conn: receiver.stop.wait(30))
    port = server.listener.getsockname()[1]
    url = f"postgresql://cs:hunter2-secret@127.0.0.1:{port}/cs"
    try:
        done = subprocess.run(
            [sys.executable, "manage.py", "shell", "-v", "0", "-c", READY_PROBE],
            cwd=ROOT,
            env=process_env(DATABASE_URL=url, DB_CONNECT_TIMEOUT="2"),
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            timeout=60,
        )
    finally:
        server.stop.set()
        server.listener.close()
    lines = [line[6:] for line in done.stdout.splitlines() if line.startswith("probe ")]
    unasked = "error: not checked, the database did not answer"
    assert json.loads(lines[0]) == {
        "status": "not ready",
        "checks": {
            "database": "error: OperationalError",
            "migrations": unasked,
            "cache": "ok",
            "broker": unasked,
        },
    }
    assert server.connections == 1


METRICS_PROBE = (
    "from django.test import Client; "
    "c = Client(HTTP_HOST='localhost', raise_request_exception=False); "
    "r = c.get('/metrics', HTTP_AUTHORIZATION='Bearer metrics-test-token-0123456789abcdef'); "
    "print('probe', r.status_code); print('probe', r.content.decode().splitlines()[0])"
)


def test_with_the_database_down_metrics_answers_503_saying_so():
    """Found by an outside probe: with PostgreSQL refusing connections, /metrics answered Django's
    HTML 500 page and logged a traceback at ERROR on every scrape, where a locked table gets a 503
    that says what is wrong (DEPLOYMENT.md "Watching it"). The password stays out of both."""
    url = f"postgresql://cs:hunter2-secret@127.0.0.1:{daemons.free_port()}/cs"
    done = subprocess.run(
        [sys.executable, "manage.py", "shell", "-v", "0", "-c", METRICS_PROBE],
        cwd=ROOT,
        env=process_env(
            DATABASE_URL=url,
            LOG_LEVEL="INFO",
            METRICS_TOKEN="metrics-test-token-0123456789abcdef",
        ),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        timeout=60,
    )
    lines = [line[6:] for line in done.stdout.splitlines() if line.startswith("probe ")]
    assert lines == [
        "503",
        "PostgreSQL could not be reached (OperationalError); /readyz says the same, and "
        "scrapes read the figures again once it answers.",
    ]
    assert "Traceback" not in done.stdout
    assert "hunter2" not in done.stdout


@pytest.mark.parametrize("path", ["/healthz", "/readyz"])
def test_a_probe_over_plain_http_is_answered_not_redirected_to_https(client, settings, path):
    """Production redirects HTTP to HTTPS; a load balancer probing the process's own port (no
    proxy, no X-Forwarded-Proto) got a 301, which it reads as down."""
    settings.SECURE_SSL_REDIRECT = True
    assert client.get(path).status_code == 200
    assert client.head(path).status_code == 200
    assert client.get("/signin/").status_code == 301


def test_metrics_is_hidden_without_a_configured_token(client, settings):
    settings.METRICS_TOKEN = ""
    assert client.get("/metrics").status_code == 404


def test_metrics_needs_the_token(client, settings, tenant_a):
    settings.METRICS_TOKEN = "metrics-test-token"
    assert client.get("/metrics").status_code == 401
    assert client.get("/metrics", HTTP_AUTHORIZATION="Bearer wrong").status_code == 401
    response = client.get("/metrics", HTTP_AUTHORIZATION="Bearer metrics-test-token")
    body = response.content.decode()
    assert response.status_code == 200
    assert f'countersign_intents{{state="queued",tenant="{tenant_a.slug}"}} 0.0' in body
    assert "countersign_oldest_queued_seconds 0.0" in body
    assert f'countersign_webhook_lag_seconds{{tenant="{tenant_a.slug}"}} 0.0' in body


TOKEN = "metrics-test-token"


@pytest.mark.parametrize("header", ["", "Bearer ", "Bearer None"])
def test_metrics_stays_hidden_whatever_is_sent_without_a_token(client, settings, header):
    settings.METRICS_TOKEN = ""
    assert client.get("/metrics", HTTP_AUTHORIZATION=header).status_code == 404


@pytest.mark.parametrize(
    "header",
    [
        "Bearer",
        f"Bearer {TOKEN[:-1]}",
        f"Bearer {TOKEN}x",
        f"Basic {TOKEN}",
        TOKEN,
        f"Bearer {TOKEN}\x00",
        "Bearer é" + TOKEN,
    ],
)
def test_metrics_refuses_anything_but_the_token(client, settings, header):
    settings.METRICS_TOKEN = TOKEN
    response = client.get("/metrics", HTTP_AUTHORIZATION=header)
    assert response.status_code == 401
    assert b"countersign_" not in response.content


def test_metrics_takes_the_token_only_from_the_header_and_only_for_get(client, settings):
    from tests.factories import UserFactory

    settings.METRICS_TOKEN = TOKEN
    assert client.get(f"/metrics?token={TOKEN}").status_code == 401
    assert client.post("/metrics", HTTP_AUTHORIZATION=f"Bearer {TOKEN}").status_code == 405
    client.force_login(
        UserFactory(is_staff=True, is_superuser=True),
        backend="django.contrib.auth.backends.ModelBackend",
    )
    assert client.get("/metrics").status_code == 401


@pytest.mark.parametrize("path", ["/healthz", "/readyz"])
def test_a_load_balancer_probing_with_head_gets_the_status_without_a_body(client, path):
    """Found by an outside probe: HEAD answered 405, which a load balancer reads as down."""
    response = client.head(path)
    assert response.status_code == 200
    assert response.content == b""
    assert client.post(path).status_code == 405
