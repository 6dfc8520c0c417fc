"""`make setup` (the first half of `make run`): it sets up the database and the demo people, and
provisions nothing at AgentMail, whatever answers at AGENTMAIL_BASE_URL; devstack provisions
the demo mailboxes once the sandbox it started itself answers."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from mailboxes.models import Mailbox
from tenants.models import Tenant
from tests.servers import server_database_url

pytestmark = pytest.mark.django_db(transaction=True)

ROOT = Path(__file__).resolve().parents[2]


def test_make_setup_provisions_nothing_in_a_sandbox_that_answers_on_the_port(sandbox):
    """Another clone's `make run` held 127.0.0.1:8025: `make setup` provisioned this clone's
    demo pods into that process's sandbox, before devstack found the port taken and refused."""
    pods_before = {p.pod_id for p in sandbox.sdk().pods.list().pods}
    env = {
        **os.environ,
        "DATABASE_URL": server_database_url("make-setup-test"),
        "AGENTMAIL_BASE_URL": sandbox.base_url,
        "AGENTMAIL_ORG_API_KEY": sandbox.org_key,
    }
    # The environment is this test run's own (-o: never sync it); the recipe is the Makefile's.
    done = subprocess.run(
        ["make", "-s", "-o", ".venv/.synced", "setup", f"MANAGE={sys.executable} manage.py"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    assert Tenant.objects.filter(slug__in=["acme", "globex"]).count() == 2
    assert not Mailbox.objects.exists()
    assert {p.pod_id for p in sandbox.sdk().pods.list().pods} == pods_before
    assert "demo mailboxes: `make run` provisions them in its own sandbox" in done.stdout
