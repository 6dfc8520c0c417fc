"""Fixtures for the staff pages' tests: a local mailbox row (no provider call), drafts written
through the real services, a helper that builds a whole intent state for the outbox pages, and
headless Chromium. A plugin of tests/conftest.py, so tests/review, tests/ui and the admin pages'
tests share them, and one browser per session."""

from __future__ import annotations

import itertools
import os
import threading

import pytest
from django.core.signals import request_finished, request_started
from django.test.client import ClientHandler
from django.utils import timezone

from intents import services
from intents.models import SendAttempt, SendIntent
from tests.factories import make_local_mailbox

_counter = itertools.count(1)


@pytest.fixture
def mailbox_a(tenant_a):
    return make_local_mailbox(tenant_a)


@pytest.fixture
def mailbox_b(tenant_b):
    return make_local_mailbox(tenant_b)


@pytest.fixture
def admin_a(tenant_a, member_of):
    return member_of(tenant_a, "admin")


def admin_of(tenant, admin_a):
    """The given admin for tenant A; for any other tenant, its first active admin (made once)."""
    from tenants.models import Membership
    from tests.factories import MembershipFactory

    if tenant.pk == admin_a.tenant_id:
        return admin_a.user
    existing = Membership.objects.filter(tenant=tenant, role="admin", is_active=True).first()
    return (existing or MembershipFactory(tenant=tenant, role="admin")).user


def based_on(client, url: str, form: str = "form") -> str:
    """What a settings form on the page at ``url`` is based on now (its hidden ``based_on``, the
    stale-save fingerprint of tenants.stale), as a post from that page carries it."""
    return client.get(url).context[form]["based_on"].value()


@pytest.fixture
def make_draft(admin_a):
    """make_draft(mailbox, **overrides) -> a pending draft written through draft_create."""

    def make(mailbox, **overrides):
        n = next(_counter)
        fields = {
            "tenant": mailbox.tenant,
            "mailbox": mailbox,
            "to": [f"customer{n}@example.com"],
            "subject": f"Your refund #{n}",
            "text": "Hello,\n\nWe refunded your order today.\n\nBest regards",
        }
        if "agent_token" not in overrides:
            fields["actor_user"] = admin_of(mailbox.tenant, admin_a)
        fields.update(overrides)
        return services.draft_create(**fields)

    return make


@pytest.fixture
def make_intent(make_draft, admin_a):
    """make_intent(mailbox, state=..., **fields) -> an approved draft's intent forced into a state
    (the worker's transitions are tested in tests/intents; here only the pages matter)."""

    def make(mailbox, state="queued", attempts=0, **fields):
        draft = make_draft(mailbox)
        version = draft.versions.get()
        intent = services.draft_approve(
            tenant=mailbox.tenant,
            draft_id=draft.pk,
            version=version.number,
            content_hash=version.content_hash,
            actor=admin_of(mailbox.tenant, admin_a),
        )
        now = timezone.now()
        for number in range(1, attempts + 1):
            SendAttempt.objects.create(
                intent=intent,
                tenant=mailbox.tenant,
                number=number,
                worker="test-worker",
                started_at=now,
                finished_at=now,
                outcome=SendAttempt.Outcome.UNCERTAIN,
                http_status=503,
                error_code="server_error",
                error_detail="503 from AgentMail after the request was written",
            )
        updates = {"state": state, "attempts": attempts, **fields}
        if state == "accepted":
            updates.setdefault("provider_message_id", f"<msg-{intent.pk}@agentmail.test>")
        SendIntent.objects.filter(pk=intent.pk).update(**updates)
        intent.refresh_from_db()
        return intent

    return make


# --- headless Chromium (one browser for the session, shared by every browser test) ---


@pytest.fixture
def chromium_present():
    from tests.browser import require_chromium

    require_chromium()


@pytest.fixture(scope="session")
def chromium(django_db_setup):
    """Debian's Chromium under Playwright's sync API (one per session: a second sync_playwright
    in the same thread is refused)."""
    from playwright.sync_api import sync_playwright

    from tests.browser import ARGS, CHROMIUM, require_chromium

    require_chromium()
    # Playwright's sync API keeps an event loop in this thread; the ORM calls the tests make
    # between browser steps are ordinary blocking calls, so Django's async guard is lifted while
    # the browser runs, and restored after.
    previous = os.environ.get("DJANGO_ALLOW_ASYNC_UNSAFE")
    os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = "true"
    try:
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=str(CHROMIUM), args=ARGS)
            yield browser
            browser.close()
    finally:
        if previous is None:
            os.environ.pop("DJANGO_ALLOW_ASYNC_UNSAFE", None)
        else:
            os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = previous


@pytest.fixture
def page(chromium, live_server):
    context = chromium.new_context(
        viewport={"width": 1280, "height": 900}, base_url=live_server.url
    )
    tab = context.new_page()
    tab.set_default_timeout(10_000)
    _in_flight.forget()  # what an earlier test left unfinished is not this one's
    yield tab
    context.close()
    _wait_for_requests_to_end()


class _InFlight:
    """Requests the live server is serving now (request_started to request_finished, by thread):
    its threads outlive their last request (the browser keeps connections alive), so waiting for
    them cost 10 s at most browser tests' teardown. The test client's requests are not counted:
    a streamed answer a test never read never finishes, and held every later teardown of that
    process for 10 s."""

    def __init__(self) -> None:
        self.by_thread: dict[int, int] = {}
        self.changed = threading.Condition()

    def started(self, sender, **kwargs) -> None:
        if isinstance(sender, type) and issubclass(sender, ClientHandler):
            return
        with self.changed:
            thread = threading.get_ident()
            self.by_thread[thread] = self.by_thread.get(thread, 0) + 1

    def finished(self, **kwargs) -> None:
        with self.changed:
            thread = threading.get_ident()
            if self.by_thread.get(thread):
                self.by_thread[thread] -= 1
                self.changed.notify_all()

    def forget(self) -> None:
        with self.changed:
            self.by_thread.clear()

    def wait_until_none(self, seconds: float) -> None:
        with self.changed:
            self.changed.wait_for(lambda: not any(self.by_thread.values()), timeout=seconds)


_in_flight = _InFlight()
request_started.connect(_in_flight.started, dispatch_uid="tests.pages.in_flight")
request_finished.connect(_in_flight.finished, dispatch_uid="tests.pages.in_flight")


def _wait_for_requests_to_end(seconds: float = 10.0) -> None:
    """Let the live server finish the requests the closed browser left behind before the test's
    database is flushed: a request still inside a transaction when the flush's TRUNCATE takes its
    locks deadlocks with it (a CI run failed so, at the teardown of a passkey sign-in)."""
    _in_flight.wait_until_none(seconds)


@pytest.fixture
def shop(transactional_db, tenant_a, member_of, mailbox_factory, live_server, settings):
    admin = member_of(tenant_a, "admin")
    # Provisioning registers the tenant's webhook at PUBLIC_BASE_URL, so the sandbox's signed
    # message.sent / message.delivered events reach the receiver of the server the browser uses.
    settings.PUBLIC_BASE_URL = live_server.url
    mailbox = mailbox_factory(tenant_a)
    return {"tenant": tenant_a, "admin": admin, "mailbox": mailbox}
