"""Fixtures for the agent API tests: real sandbox mailboxes, tokens made by the real service, and
a small client that speaks the API's headers."""

from __future__ import annotations

import json
import uuid

import pytest
from django.core.cache import cache
from django.test import Client

from scripts import devstack
from tenants.tokens import token_create
from tests.servers import free_port, server_database_url, serving

ALL_SCOPES = ("drafts:write", "drafts:read")


@pytest.fixture(autouse=True)
def _fresh_rate_limits():
    cache.clear()
    yield
    cache.clear()


@pytest.fixture(scope="session")
def mcp_url(django_db_setup, django_db_blocker, tmp_path_factory):
    """`make run`'s MCP process on a free port, on the test database. One per test process, for
    test_mcp, test_mcp_shape and test_mcp_broadcasts: a module-scoped one started again for each
    module, and under xdist for each worker that ran a test of that module (up to nine gunicorn
    starts of Django, 3-6 s each on a loaded machine). The process keeps nothing a test changes:
    its rate-limit windows, idempotency keys and sessions are rows of the test database, emptied
    after each (transactional) test, and every test makes its own tenant and tokens."""
    with django_db_blocker.unblock():
        database_url = server_database_url("mcp-test")
    addr = f"127.0.0.1:{free_port()}"
    env = {**devstack.child_env(), "DATABASE_URL": database_url, "MCP_THREADS": "2"}
    with serving(
        "mcp",
        devstack.mcp_command(addr),
        env=env,
        log_path=tmp_path_factory.mktemp("mcp") / "mcp.log",
        health_url=f"http://{addr}/healthz",
    ):
        yield f"http://{addr}/mcp/"


@pytest.fixture
def mailbox_a(mailbox_factory, tenant_a):
    return mailbox_factory(tenant_a, username=f"support-a-{uuid.uuid4().hex[:6]}")


@pytest.fixture
def mailbox_a2(mailbox_factory, tenant_a):
    return mailbox_factory(tenant_a, username=f"billing-a-{uuid.uuid4().hex[:6]}")


@pytest.fixture
def mailbox_b(mailbox_factory, tenant_b):
    return mailbox_factory(tenant_b, username=f"support-b-{uuid.uuid4().hex[:6]}")


@pytest.fixture
def make_token(db, member_of):
    """make_token(tenant, scopes=..., mailboxes=(), expires_at=None) -> plaintext token."""

    def make(tenant, scopes=ALL_SCOPES, mailboxes=(), expires_at=None, name=None):
        admin = member_of(tenant, "admin").user
        _, plaintext = token_create(
            tenant=tenant,
            name=name or f"agent-{uuid.uuid4().hex[:8]}",
            scopes=scopes,
            mailbox_ids=[m.pk for m in mailboxes],
            expires_at=expires_at,
            actor=admin,
        )
        return plaintext

    return make


@pytest.fixture
def token_a(make_token, tenant_a):
    return make_token(tenant_a)


@pytest.fixture
def token_b(make_token, tenant_b):
    return make_token(tenant_b)


class Api:
    """The agent API through Django's test client (WSGI, same process, real database)."""

    def __init__(self, client: Client):
        self.client = client

    def _headers(self, token, key, extra):
        headers = dict(extra or {})
        if token is not None:
            headers["Authorization"] = f"Bearer {token}"
        if key is not None:
            headers["Idempotency-Key"] = key
        return headers

    def post(
        self,
        path,
        body=None,
        *,
        token,
        key=None,
        raw=None,
        content_type="application/json",
        headers=None,
    ):
        data = raw if raw is not None else (json.dumps(body) if body is not None else "")
        return self.client.generic(
            "POST",
            f"/api/v1{path}",
            data=data,
            content_type=content_type,
            headers=self._headers(token, key, headers),
        )

    def get(self, path, *, token, params=None, headers=None):
        return self.client.get(
            f"/api/v1{path}", data=params or {}, headers=self._headers(token, None, headers)
        )


@pytest.fixture
def api(client):
    return Api(client)


def draft_body(mailbox, /, **overrides):
    body = {
        "mailbox": mailbox.address,
        "to": ["customer@example.com"],
        "subject": "Re: Where is my order?",
        "text": "It shipped yesterday.",
    }
    body.update(overrides)
    return body
