from __future__ import annotations

import os

import pytest

from tests.factories import PASSWORD, MembershipFactory, TenantFactory

# The staff pages' fixtures (local mailboxes, drafts, intents in a state, one headless Chromium
# per session), shared by tests/review, tests/ui and the admin pages' tests; a receiver of agent
# events on loopback (tests.event_receiver).
pytest_plugins = ["tests.pages", "tests.idp.fixtures", "tests.event_receiver"]


def _uses_database(item) -> bool:
    fixtures = set(getattr(item, "fixturenames", ()))
    return item.get_closest_marker("django_db") is not None or bool(
        fixtures & {"db", "transactional_db", "live_server", "django_db_setup"}
    )


def pytest_collection_modifyitems(config, items):
    """Under pytest-xdist (`make test`), the slow tests that never touch the test database (the
    nemesis and bench harnesses at their small size, with servers and databases of their own)
    come first, so the scheduler hands them out one per worker at the start and they overlap the
    many short tests instead of ending the run on one worker alone. pytest-django sorted the list
    before (database tests, then transactional ones, which empty the tables a migration filled,
    then the rest); a stable sort that moves only tests without a database keeps that order for
    every test that has one. Every worker collects the same order, as xdist requires; without
    xdist the order is left alone."""
    if os.environ.get("PYTEST_XDIST_WORKER"):
        items.sort(
            key=lambda item: not (item.get_closest_marker("slow") and not _uses_database(item))
        )


@pytest.fixture(autouse=True)
def no_process_outlives_its_test():
    """Processes started through ``tests.servers.started`` (the sending workers) end with their
    test, even when it failed before stopping them."""
    yield
    from tests.servers import kill_leftovers

    kill_leftovers()


@pytest.fixture(autouse=True)
def webhook_applier_beside_live_server(request):
    """Store first: a live server's webhook receiver only stores events, and in production the
    django-q2 task it wakes applies them. Tests run no cluster, so beside every live server the
    applier loop runs in a thread (what ``manage.py webhooks_apply`` runs), stopped before the
    test's database is emptied. A test marked ``without_webhook_applier`` (one that needs an
    event to stay pending) runs without it."""
    if "live_server" not in request.fixturenames or request.node.get_closest_marker(
        "without_webhook_applier"
    ):
        yield
        return
    import threading

    from django.db import connections

    from webhooks.services import applier

    request.getfixturevalue("transactional_db")
    request.getfixturevalue("live_server")
    stop = threading.Event()

    def run():
        try:
            applier.events_apply_loop(stop=stop, interval=0.02)
        finally:
            connections.close_all()

    thread = threading.Thread(target=run, name="webhooks-applier", daemon=True)
    thread.start()
    yield
    stop.set()
    thread.join(10)


@pytest.fixture
def tenant_a(db):
    return TenantFactory(name="Tenant A", slug="tenant-a")


@pytest.fixture
def tenant_b(db):
    return TenantFactory(name="Tenant B", slug="tenant-b")


@pytest.fixture
def member_of(db):
    """member_of(tenant, role) -> Membership with a fresh user."""

    def make(tenant, role="approver", **kwargs):
        return MembershipFactory(tenant=tenant, role=role, **kwargs)

    return make


@pytest.fixture
def signed_in(client):
    """signed_in(user) -> a test client with that user's session."""

    def sign_in(user):
        client.force_login(user, backend="django.contrib.auth.backends.ModelBackend")
        return client

    return sign_in


@pytest.fixture
def password():
    return PASSWORD


@pytest.fixture(scope="session")
def sandbox_server():
    """One sandbox AgentMail process for the test session, on a free loopback port."""
    from mailboxes.sandbox.testing import SandboxServer

    # Under xdist every worker starts its own at the same moment, beside its Django start-up:
    # on a loaded machine that takes longer than the helper's 15 s, and a session fixture that
    # fails once fails every test of that worker.
    with SandboxServer(startup_timeout=120) as server:
        yield server


@pytest.fixture
def sandbox(sandbox_server, settings):
    """The sandbox, with settings pointed at it and no faults left over from another test."""
    settings.AGENTMAIL_BASE_URL = sandbox_server.base_url
    settings.AGENTMAIL_ORG_API_KEY = sandbox_server.org_key
    # Webhooks from the sandbox go nowhere unless a test serves a receiver (port 9 refuses fast).
    settings.PUBLIC_BASE_URL = "http://127.0.0.1:9"
    sandbox_server.clear_faults()
    yield sandbox_server
    sandbox_server.clear_faults()


@pytest.fixture
def mailbox_factory(sandbox, db):
    """mailbox_factory(tenant, username=None, **kw) -> an active Mailbox provisioned in the sandbox
    (its own inbox and inbox-scoped key), through the real provisioning service."""
    import uuid

    from mailboxes import provisioning

    def make(tenant, username=None, **kwargs):
        username = username or f"mb-{uuid.uuid4().hex[:10]}"
        return provisioning.mailbox_create(tenant=tenant, username=username, **kwargs)

    return make
