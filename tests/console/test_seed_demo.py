"""seed_demo: the demo people and tenants, with team review and languages to show, once."""

from io import StringIO

import pytest
from django.core.management import CommandError, call_command

from mailboxes import provider
from mailboxes.models import Mailbox
from mailboxes.sandbox.testing import SandboxServer
from tenants.models import Membership, Tenant, User
from webhooks.models import WebhookEndpoint

pytestmark = pytest.mark.django_db


def seed() -> str:
    out = StringIO()
    call_command("seed_demo", stdout=out)
    return out.getvalue()


def test_seed_demo_sets_up_team_review_and_languages_and_changes_nothing_the_second_time(sandbox):
    """Against a sandbox of its own (``sandbox``): without one, seed_demo's mailboxes asked the
    development default address, and a ``make run`` on the same machine answered there that the
    demo inboxes were taken (a red CI run while the demo was up)."""
    assert "(17 created)" in seed()  # 2 tenants, 7 people, 8 memberships
    acme = Tenant.objects.get(slug="acme")
    assert (acme.sla_minutes, acme.escalate_to_role) == (60, "admin")
    assert Tenant.objects.get(slug="globex").sla_minutes is None
    greta = User.objects.get(email="approver@globex.test")
    assert (greta.language, greta.time_zone) == ("de", "Europe/Berlin")
    glen = User.objects.get(email="viewer@globex.test")
    assert (glen.language, glen.time_zone) == ("es", "America/Mexico_City")
    assert User.objects.get(email="admin@acme.test").language == ""
    counts = (Tenant.objects.count(), User.objects.count(), Membership.objects.count())
    assert "(0 created)" in seed()
    assert (Tenant.objects.count(), User.objects.count(), Membership.objects.count()) == counts


def provider_state() -> dict:
    """What the demo holds of AgentMail: pods, inboxes, keys and webhooks, by tenant."""
    return {
        tenant.slug: (
            tenant.agentmail_pod_id,
            sorted(tenant.mailboxes.values_list("inbox_id", "provider_api_key_id", "status")),
            WebhookEndpoint.objects.filter(tenant=tenant)
            .values_list("provider_webhook_id", flat=True)
            .first(),
        )
        for tenant in Tenant.objects.order_by("slug")
    }


def use_sandbox(settings, server: SandboxServer) -> None:
    settings.AGENTMAIL_BASE_URL = server.base_url
    settings.AGENTMAIL_ORG_API_KEY = server.org_key
    # Webhooks from the sandbox go nowhere (port 9 refuses fast), as in the sandbox fixture.
    settings.PUBLIC_BASE_URL = "http://127.0.0.1:9"


def test_seed_demo_provisions_anew_in_a_sandbox_that_lost_the_demo_pods(settings):
    """The demo's pods live in one sandbox's SQLite file: a `make run` on another port, or after
    .data/sandbox.sqlite3 was deleted, met a sandbox that knew none of them, and seed_demo died
    with "AgentMail answered 404 not_found: Pod not found" (a traceback; make run exited 1)."""
    # Sandboxes of their own: the session's sandbox holds the demo inboxes' addresses already.
    with SandboxServer(startup_timeout=120) as first, SandboxServer(startup_timeout=120) as fresh:
        use_sandbox(settings, first)
        seed()
        old = provider_state()
        use_sandbox(settings, fresh)
        out = seed()
        new = provider_state()
        org = fresh.sdk()
        for tenant in Tenant.objects.all():
            assert tenant.agentmail_pod_id != old[tenant.slug][0]
            assert f"demo tenant {tenant.slug}: the sandbox AgentMail does not know its pod" in out
            inboxes = org.pods.inboxes.list(tenant.agentmail_pod_id).inboxes
            assert sorted(i.inbox_id for i in inboxes) == sorted(
                tenant.mailboxes.values_list("inbox_id", flat=True)
            )
            (hook,) = org.pods.webhooks.list(tenant.agentmail_pod_id).webhooks
            endpoint = WebhookEndpoint.objects.get(tenant=tenant)
            assert endpoint.provider_webhook_id == hook.webhook_id
            assert [s.plaintext() for s in endpoint.secrets.filter(retired_at__isnull=True)] == [
                hook.secret
            ]
        for mailbox in Mailbox.objects.all():
            assert mailbox.status == Mailbox.Status.ACTIVE
            assert mailbox.key_refused_at is None
            keys = org.inboxes.api_keys.list(mailbox.inbox_id).api_keys
            assert [k.api_key_id for k in keys] == [mailbox.provider_api_key_id]
            assert provider.check_key(api_key=mailbox.api_key(), inbox_id=mailbox.inbox_id).ok
        again = seed()
        assert "does not know" not in again
        assert provider_state() == new


def test_seed_demo_says_in_one_line_what_the_sandbox_refused(settings):
    with SandboxServer(startup_timeout=120) as server:
        use_sandbox(settings, server)
        server.fault("create_pod", "500_before")
        with pytest.raises(CommandError) as refused:
            seed()
    assert str(refused.value) == (
        "demo mailboxes: AgentMail refused the request: AgentMail answered 500 internal_error: "
        f"Internal server error (AGENTMAIL_BASE_URL={server.base_url})"
    )
