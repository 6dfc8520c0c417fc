"""The database backend's health check (config/postgres/base.py): spared for a connection that
served the previous request cleanly within DB_HEALTH_CHECK_GRACE, made otherwise, so a
connection the server dropped is replaced before a request uses it, or at worst after one
request fails. Requests go through the WSGI application in this thread, so Django's
request_started/request_finished connection handling runs as under gunicorn (the test client
switches it off)."""

from __future__ import annotations

import io
import time
import uuid

import psycopg
import pytest
from django.db import connection

from config.wsgi import application

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def persistent(monkeypatch, settings):
    """Connections kept between requests, as in production (DB_CONN_MAX_AGE, 60 s)."""
    monkeypatch.setitem(connection.settings_dict, "CONN_MAX_AGE", 60)
    monkeypatch.setitem(connection.settings_dict, "CONN_HEALTH_CHECKS", True)
    settings.DB_HEALTH_CHECK_GRACE = 0.5
    connection.close()
    yield settings
    connection.close()


def request() -> str:
    """One webhook delivery to an unknown endpoint: a 404 after one query for the endpoint."""
    environ = {
        "REQUEST_METHOD": "POST",
        "PATH_INFO": f"/webhooks/agentmail/{uuid.uuid4()}/",
        "SERVER_NAME": "testserver",
        "SERVER_PORT": "80",
        "HTTP_HOST": "testserver",
        "CONTENT_TYPE": "application/json",
        "CONTENT_LENGTH": "2",
        "wsgi.input": io.BytesIO(b"{}"),
        "wsgi.url_scheme": "http",
        "wsgi.errors": io.StringIO(),
    }
    statuses: list[str] = []
    response = application(environ, lambda status, headers, exc=None: statuses.append(status))
    b"".join(response)
    response.close()  # request_finished: Django's end-of-request connection handling
    return statuses[0].split()[0]


def backend_pid() -> int:
    return connection.connection.info.backend_pid


def terminate(pid: int) -> None:
    params = connection.get_connection_params()
    params = {
        k: v for k, v in params.items() if k in {"host", "port", "user", "password", "dbname"}
    }
    with psycopg.connect(**params, autocommit=True) as admin:
        admin.execute("SELECT pg_terminate_backend(%s)", [pid])


def test_a_connection_idle_past_the_grace_is_checked_and_replaced(persistent):
    assert request() == "404"
    first = backend_pid()
    terminate(first)
    time.sleep(0.6)  # past the grace: the check runs and finds the connection dead

    assert request() == "404"
    assert backend_pid() != first


def test_within_the_grace_no_check_runs_and_at_most_one_request_pays_for_a_dropped_connection(
    persistent,
):
    assert request() == "404"
    first = backend_pid()
    assert request() == "404"
    assert backend_pid() == first  # kept between requests
    terminate(first)

    # Within the grace the check is spared: the dead connection is found by the request's own
    # query, that one request fails, and the connection is replaced as it ends.
    assert request() == "500"
    assert request() == "404"
    assert backend_pid() != first


def test_with_no_grace_every_request_is_checked(persistent):
    persistent.DB_HEALTH_CHECK_GRACE = 0
    assert request() == "404"
    first = backend_pid()
    terminate(first)

    assert request() == "404"
    assert backend_pid() != first
