from __future__ import annotations

import os

import pytest

from tests import dbflush
from tests.factories import PASSWORD, MembershipFactory, TenantFactory
from tests.routed_client import RoutedClient

# The staff pages' fixtures (local mailboxes, drafts, intents in a state, one headless Chromium
# per session), shared by tests/review, tests/ui and the admin pages' tests; a receiver of agent
# events on loopback (tests.event_receiver).
pytest_plugins = ["tests.pages", "tests.idp.fixtures", "tests.event_receiver"]


def pytest_configure(config):
    """pytest-django's ``live_server`` runs Django's ``LiveServerThread``: its server answers
    without Nagle's 40 ms delay on each request (tests.nodelay says why)."""
    from django.test.testcases import LiveServerThread

    from tests.nodelay import NoDelayWSGIServer

    LiveServerThread.server_class = NoDelayWSGIServer


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


@pytest.fixture(scope="session")
def django_db_keepdb():
    """The test database already exists when pytest-django sets it up: a copy of the migrated
    template (``django_db_modify_db_settings`` below), which migrate finds complete. Kept by
    pytest-django, and left at the end of the session (that fixture says why)."""
    return True


@pytest.fixture(scope="session")
def django_db_modify_db_settings(django_db_modify_db_settings_parallel_suffix, request):
    """Each xdist worker's test database is a copy of one migrated template (tests/dbtemplate.py)
    instead of a migration of its own. With ``--reuse-db`` an existing test database is kept.

    The copy and the databases tests made beside it (named after it, ``<name>_...``) are left
    when the session ends and dropped when the next session of that name starts: each
    ``DROP DATABASE`` forces a checkpoint, and at the end of a run, with the other workers still
    writing, each worker's drops took 21-27 s on the critical path of ``make test``; at the start
    the server has almost nothing to write. What stays between runs is one 12 MB copy per test
    database name (``make test`` uses one per worker)."""
    from django.db import connections

    from tests import dbtemplate

    reuse = request.config.getvalue("reuse_db") and not request.config.getvalue("create_db")
    name = connections["default"].creation._get_test_db_name()
    blocker = request.getfixturevalue("django_db_blocker")
    with blocker.unblock():
        if not (reuse and dbtemplate.exists(name)):
            dbtemplate.drop_satellites(name)
            dbtemplate.copy_template(name)
    yield
    connections.close_all()


@pytest.fixture(scope="session")
def migrated_template(django_db_blocker):
    """(admin URL of the test server, name of the migrated template database): harnesses copy it
    for a database of their own instead of migrating one."""
    from tests import dbtemplate

    with django_db_blocker.unblock():
        return dbtemplate.admin_url(), dbtemplate.ensure_template()


@pytest.fixture(scope="session")
def migrated_dump(migrated_template, tmp_path_factory):
    """The environment of a harness that runs PostgreSQL servers of its own (the nemesis, the
    cluster): its scratch database is restored from this pg_dump of the migrated template
    instead of migrated (reliability.nemesis.SCHEMA_DUMP_ENV)."""
    import subprocess

    from reliability.nemesis import SCHEMA_DUMP_ENV, pg_tool
    from tests import dbtemplate

    _admin, template = migrated_template
    dump = tmp_path_factory.mktemp("schema") / "migrated.dump"
    subprocess.run(
        [
            pg_tool("pg_dump"),
            "--format=custom",
            "--no-owner",
            f"--file={dump}",
            dbtemplate.admin_url(template),
        ],
        check=True,
        capture_output=True,
    )
    return {**os.environ, SCHEMA_DUMP_ENV: str(dump)}


@pytest.fixture(autouse=True)
def quick_flush(request):
    """A transactional test ends with a flush of every table, and Django then sends post_migrate,
    whose receivers recreate every content type and permission: 0.1 s of CPU in the test process
    and more in PostgreSQL, for each of the suite's 800-odd transactional tests. Nothing here uses
    permissions, and content types are created on demand (``get_for_model``), so once the test
    database is set up those two receivers are replaced by one that forgets the cached content
    types (their rows are gone after a flush). The flush itself empties only the tables the test
    wrote (tests/dbflush.py)."""
    if _uses_database(request.node):
        request.getfixturevalue("django_db_setup")
        _trim_flush_signals()
        dbflush.install()
    yield


def _forget_content_types(**kwargs):
    from django.contrib.contenttypes.models import ContentType

    ContentType.objects.clear_cache()


def _trim_flush_signals():
    from django.contrib.auth.management import create_permissions
    from django.contrib.contenttypes.management import create_contenttypes
    from django.db.models.signals import post_migrate

    # Each call after the first finds nothing to disconnect and the same receiver connected.
    post_migrate.disconnect(
        create_permissions, dispatch_uid="django.contrib.auth.management.create_permissions"
    )
    post_migrate.disconnect(create_contenttypes)
    post_migrate.connect(_forget_content_types, dispatch_uid="tests.forget_content_types")


@pytest.fixture(scope="session", autouse=True)
def preview_slots_of_this_process(tmp_path_factory):
    """PDF previews take render slots that every process of a host shares (lock files in
    ATTACHMENT_PREVIEW_SLOT_DIR): each test process has its own, so that a slow preview of one
    xdist worker (or of another checkout's suite) does not make another's wait or answer 503."""
    from django.conf import settings

    settings.ATTACHMENT_PREVIEW_SLOT_DIR = str(tmp_path_factory.mktemp("preview-slots"))


@pytest.fixture(autouse=True)
def empty_cache():
    """Each test starts with an empty cache (the process's own, outside production): what one
    test kept (an identity provider's discovery document under an issuer whose port the next
    test's provider may be given, a rendered preview) is not another test's."""
    from django.core.cache import cache

    cache.clear()
    yield


@pytest.fixture(autouse=True)
def each_test_starts_in_the_default_language():
    """The language a request activated stays active on its thread after the response (Django's
    LocaleMiddleware does not reset it): a German page fetched by one test made the next test's
    ``call_command`` refuse in German, which a real ``manage.py`` process never does."""
    from django.utils import translation

    translation.deactivate()
    yield
    translation.deactivate()


@pytest.fixture(autouse=True)
def no_process_outlives_its_test():
    """Processes started through ``tests.servers.started`` (the sending workers) end with their
    test, even when it failed before stopping them."""
    yield
    from tests.servers import kill_leftovers

    kill_leftovers()


# How often the applier beside a live server looks for events when no request woke it (events a
# test stored without a request). It looked every 20 ms: 50 transactions a second for as long as
# every live-server test ran, 4 % of a core in the test process alone.
APPLIER_LOOK_SECONDS = 0.25


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

    from django.core.signals import request_finished
    from django.db import connections

    from webhooks.services import applier

    request.getfixturevalue("transactional_db")
    request.getfixturevalue("live_server")
    stop, wake = threading.Event(), threading.Event()

    def run():
        try:
            while not stop.is_set():
                taken, finished = applier.events_apply_batch(limit=applier.APPLY_BATCH_SIZE)
                if taken < applier.APPLY_BATCH_SIZE or not finished:
                    wake.wait(APPLIER_LOOK_SECONDS)
                    wake.clear()
        finally:
            connections.close_all()

    def woken(**kwargs):
        wake.set()

    # A delivery is stored before its answer is sent: the end of any request of the live server
    # (a webhook's among them) wakes the applier, which otherwise looks only now and then.
    request_finished.connect(woken, dispatch_uid="tests.conftest.applier_wake")
    thread = threading.Thread(target=run, name="webhooks-applier", daemon=True)
    thread.start()
    yield
    request_finished.disconnect(dispatch_uid="tests.conftest.applier_wake")
    stop.set()
    wake.set()
    thread.join(10)


@pytest.fixture
def client():
    """pytest-django's ``client``, routed as production routes (tests/routed_client.py)."""
    return RoutedClient()


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
    """The sandbox, with settings pointed at it and nothing left over from another test: it
    serves the whole session, and what a test did to it outlives that test's database. A bounce
    suppresses the address for the whole organization, as AgentMail does, so the backfill tests'
    sends to ops@customer.test were refused (403 message_rejected, the intent ``failed``) after
    the webhook end-to-end test had bounced it; webhooks switched off, a moved clock, a changed
    config, registered webhooks and idempotency keys stayed too. A reset keeps the organization,
    its key and default pod and wipes the rest (faults included), as tests/sandbox does."""
    settings.AGENTMAIL_BASE_URL = sandbox_server.base_url
    settings.AGENTMAIL_ORG_API_KEY = sandbox_server.org_key
    # Webhooks from the sandbox go nowhere unless a test serves a receiver (port 9 refuses fast).
    settings.PUBLIC_BASE_URL = "http://127.0.0.1:9"
    sandbox_server.reset()
    yield sandbox_server
    sandbox_server.clear_faults()
    # A test that slowed the provider and then failed before restoring it must not slow the
    # next tests of its worker (a timed-out test once left 1.5 s per call behind: 3 more failed).
    sandbox_server.config(latency_ms=0)


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
