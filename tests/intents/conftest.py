"""Fixtures for the intents tests: a local mailbox row (no provider), approvers, drafts.

Acceptance tests that talk to the sandbox use the lead's `sandbox` and `mailbox_factory`
fixtures from tests/conftest.py instead of `local_mailbox`.
"""

from __future__ import annotations

import pytest

from intents import services
from tests.factories import UserFactory, approve_new_draft, make_local_mailbox


@pytest.fixture
def local_mailbox(tenant_a):
    return make_local_mailbox(tenant_a)


@pytest.fixture
def approver(tenant_a, member_of):
    return member_of(tenant_a, "approver").user


@pytest.fixture
def new_draft(tenant_a, local_mailbox, approver):
    """new_draft(**overrides) -> a pending draft written by a person."""

    def make(**overrides):
        fields = {
            "tenant": tenant_a,
            "mailbox": local_mailbox,
            "to": ["Customer@Example.com"],
            "subject": "Your refund",
            "text": "We refunded your order.",
            "actor_user": approver,
        }
        fields.update(overrides)
        return services.draft_create(**fields)

    return make


@pytest.fixture
def second_user():
    return UserFactory()


# --- live fixtures: the sandbox over real HTTP ---------------------------------------------------


@pytest.fixture
def fast_send(settings):
    """Short backoff, lease and read timeout so fault tests take seconds, not minutes."""
    settings.SEND_BACKOFF_BASE_SECONDS = 0.01
    settings.SEND_BACKOFF_CAP_SECONDS = 0.05
    settings.AGENTMAIL_READ_TIMEOUT = 1.0
    settings.SEND_LEASE_SECONDS = 5
    return settings


@pytest.fixture
def live(tenant_a, member_of, mailbox_factory, sandbox, fast_send):
    """A tenant with a sandbox mailbox and an approver; live.approved(**draft) -> SendIntent."""
    import types

    mailbox = mailbox_factory(tenant_a)
    approver = member_of(tenant_a, "approver").user

    def approved(**overrides):
        box = overrides.pop("mailbox", mailbox)
        return approve_new_draft(tenant_a, box, approver, **overrides)

    return types.SimpleNamespace(
        tenant=tenant_a, mailbox=mailbox, approver=approver, sandbox=sandbox, approved=approved
    )


def worker_env(sandbox, **extra) -> dict:
    """Environment for a worker subprocess that shares this test's database and sandbox."""
    import os
    from urllib.parse import quote, urlencode

    from django.db import connection

    s = connection.settings_dict
    auth = quote(s["USER"] or "", safe="")
    if s.get("PASSWORD"):
        auth += ":" + quote(s["PASSWORD"], safe="")
    host = quote(s["HOST"] or "", safe="")
    port = f":{s['PORT']}" if s.get("PORT") else ""
    query = urlencode({k: v for k, v in s.get("OPTIONS", {}).items() if k == "host"})
    url = f"postgresql://{auth}@{host}{port}/{s['NAME']}" + (f"?{query}" if query else "")
    env = {
        **os.environ,
        "COUNTERSIGN_ENV": "test",
        "DATABASE_URL": url,
        "AGENTMAIL_BASE_URL": sandbox.base_url,
        "AGENTMAIL_ORG_API_KEY": sandbox.org_key,
        "LOG_LEVEL": "WARNING",
    }
    env.update({k: str(v) for k, v in extra.items()})
    return env


def start_worker(sandbox, *args, **env):
    import subprocess
    import sys
    from pathlib import Path

    from tests.servers import started

    root = Path(__file__).resolve().parents[2]
    return started(
        subprocess.Popen(
            [sys.executable, "manage.py", "intents_worker", *args],
            cwd=root,
            env=worker_env(sandbox, **env),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
    )


def wait_until_polling(worker, timeout: float = 120) -> list[str]:
    """Read the worker's log until it says it started (its SIGTERM handler is in place by then),
    and go on reading it to its end; the lines, as they come (start the worker with
    ``LOG_LEVEL="INFO"``, and wait for it with ``wait``, not ``communicate``). On a loaded machine
    starting Django took longer than a test's whole window, and a SIGTERM before the handler
    killed the worker (-15) with nothing tested."""
    import threading

    said: list[str] = []
    found = threading.Event()

    def read() -> None:
        for line in worker.stderr:
            said.append(line)
            if "intents.worker.started" in line:
                found.set()

    threading.Thread(target=read, daemon=True).start()
    assert found.wait(timeout), "".join(said)
    return said


@pytest.fixture
def intent(new_draft, approver):
    draft = new_draft()
    version = draft.versions.get()
    return services.draft_approve(
        tenant=draft.tenant,
        draft_id=draft.pk,
        version=1,
        content_hash=version.content_hash,
        actor=approver,
    )
