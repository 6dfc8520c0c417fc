"""Outside probes of the tenant admin console (another tenant's ids through every URL that names
a row: tests/console/test_views_outsiders.py): the token secret after its one showing, mailbox provisioning by an admin demoted
meanwhile or of a disabled mailbox, and two admins saving one member's rights at once."""

import logging
import re
import uuid

import pytest
from django.conf import settings
from django.urls import reverse

from mailboxes import provisioning
from mailboxes.models import Mailbox
from tenants import services
from tenants.models import AgentToken, AuditEvent
from tenants.stale import StaleSave
from tests.factories import make_local_mailbox
from tests.intents.helpers import run_concurrently
from tests.routed_client import RoutedClient

pytestmark = pytest.mark.django_db


def _client(user):
    client = RoutedClient(raise_request_exception=False)
    client.force_login(user, backend="django.contrib.auth.backends.ModelBackend")
    return client


def test_a_token_secret_is_in_no_page_log_or_audit_row_after_creation(tenant_a, member_of, caplog):
    admin = member_of(tenant_a, "admin")
    client = _client(admin.user)
    with caplog.at_level(logging.DEBUG):
        created = client.post(
            reverse("token_new", args=[tenant_a.slug]),
            {"name": "bot", "scopes": ["drafts:write"]},
        )
    plaintext = re.search(r"cs_[A-Za-z0-9]{8}_[A-Za-z0-9_-]{43}", created.content.decode()).group(0)
    secret = plaintext.split("_", 2)[2]
    pages = [
        client.get(reverse("token_list", args=[tenant_a.slug])),
        client.get(reverse("token_new", args=[tenant_a.slug]), follow=True),
        client.get(reverse("admin_audit", args=[tenant_a.slug])),
        client.get(reverse("admin_audit_csv", args=[tenant_a.slug])),
        client.get(reverse("admin_home", args=[tenant_a.slug])),
    ]
    bodies = [b"".join(p.streaming_content) if p.streaming else p.content for p in pages]
    assert all(p.status_code == 200 for p in pages)
    assert not [b for b in bodies if secret.encode() in b]
    assert secret not in caplog.text
    assert secret not in str(list(AuditEvent.objects.values_list("data", flat=True)))
    assert secret not in str(list(AgentToken.objects.values()))


@pytest.mark.parametrize("how", ["retry", "create again"])
def test_provisioning_refuses_an_admin_demoted_meanwhile(tenant_a, member_of, sandbox, how):
    """Found by this probe: provisioning (the mailbox page's retry, and a create that finds the
    row) never checked the actor again, so an admin demoted while their request ran brought
    the mailbox into service: an inbox and a key at AgentMail, the mailbox active."""
    alice = member_of(tenant_a, "admin")
    bob = member_of(tenant_a, "admin")
    username = f"waiting-{uuid.uuid4().hex[:8]}"
    mailbox = Mailbox.objects.create(
        tenant=tenant_a,
        username=username,
        address=f"{username}@{settings.AGENTMAIL_INBOX_DOMAIN}",
        status=Mailbox.Status.PROVISIONING,
    )
    services.member_set_role(tenant=tenant_a, membership_id=alice.pk, role="viewer", actor=bob.user)
    audited = AuditEvent.objects.count()
    with pytest.raises(services.NotAnAdmin):
        if how == "retry":
            provisioning.mailbox_provision(mailbox=mailbox, actor=alice.user)
        else:
            provisioning.mailbox_create(tenant=tenant_a, username=username, actor=alice.user)
    mailbox.refresh_from_db()
    assert (mailbox.status, mailbox.inbox_id, mailbox.api_key_sealed) == ("provisioning", "", "")
    assert AuditEvent.objects.count() == audited


def test_creating_a_disabled_mailbox_again_is_refused_not_called_ready(
    tenant_a, member_of, mailbox_factory
):
    """Found by this probe: the create form with a disabled mailbox's username answered
    "connected and ready to send" and left it disabled."""
    admin = member_of(tenant_a, "admin")
    username = f"paused-{uuid.uuid4().hex[:8]}"
    mailbox = mailbox_factory(tenant_a, username=username)
    client = _client(admin.user)
    client.post(reverse("mailbox_status", args=[tenant_a.slug, mailbox.pk]), {"status": "disabled"})
    again = client.post(reverse("mailbox_create", args=[tenant_a.slug]), {"username": username})
    assert again.status_code == 400
    assert "already has the mailbox" in again.content.decode()
    assert Mailbox.objects.get(pk=mailbox.pk).status == "disabled"


@pytest.mark.django_db(transaction=True)
def test_two_admins_saving_one_members_rights_from_the_same_page_one_wins(tenant_a, member_of):
    alice = member_of(tenant_a, "admin")
    bob = member_of(tenant_a, "admin")
    carol = member_of(tenant_a, "approver")
    first = make_local_mailbox(tenant_a, username="first")
    second = make_local_mailbox(tenant_a, username="second")
    shown = services.member_rights_fingerprint(carol)
    admins, wanted = [alice.user, bob.user], [first.pk, second.pk]

    def save(i):
        return services.member_set_mailbox_rights(
            tenant=tenant_a,
            membership_id=carol.pk,
            approve_all_mailboxes=False,
            mailbox_ids=[wanted[i]],
            actor=admins[i],
            based_on=shown,
        )

    results = run_concurrently(save, 2)
    won = [i for i, r in enumerate(results) if not isinstance(r, Exception)]
    assert len(won) == 1, results
    assert isinstance(results[1 - won[0]], StaleSave)
    assert list(carol.approve_mailboxes.values_list("pk", flat=True)) == [wanted[won[0]]]
    assert AuditEvent.objects.filter(action="member.rights_changed").count() == 1
