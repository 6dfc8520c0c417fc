"""Found by an outside probe: the retention clock of a draft whose send ended long after its
approval. The purge measured the tenant's retention from the draft's last change (its approval)
alone, so a send that waited for a person past the retention (needs attention over a holiday,
with a retention of a week) lost its body at the next daily run after the person decided on it:
cancelled so as to re-approve it, it could no longer be re-approved."""

from datetime import timedelta

import pytest
from django.utils import timezone

from intents import services, tasks
from intents.models import Draft, DraftVersion, SendIntent
from tests.factories import approve_new_draft

pytestmark = pytest.mark.django_db


@pytest.fixture
def waited(tenant_a, local_mailbox, approver):
    """A draft approved 10 days ago whose send has needed attention since, in a tenant that
    keeps bodies for 7 days."""
    tenant_a.retention_days = 7
    tenant_a.save(update_fields=["retention_days"])
    intent = approve_new_draft(tenant_a, local_mailbox, approver, text="private body")
    long_ago = timezone.now() - timedelta(days=10)
    SendIntent.objects.filter(pk=intent.pk).update(state="needs_attention", updated_at=long_ago)
    Draft.objects.filter(pk=intent.draft_id).update(updated_at=long_ago)
    return intent


def test_a_send_cancelled_today_keeps_its_body_to_be_re_approved(tenant_a, approver, waited):
    services.intent_cancel(tenant=tenant_a, intent_id=waited.pk, actor=approver, reason="resend")

    tasks.retention_purge()

    assert DraftVersion.objects.get(pk=waited.draft_version_id).text == "private body"
    draft = services.draft_reopen(
        tenant=tenant_a, draft_id=waited.draft_id, actor=approver, reason="send it after all"
    )
    assert DraftVersion.objects.get(draft=draft, number=draft.current_version).text == (
        "private body"
    )


def test_the_body_goes_once_the_retention_passed_since_the_send_ended(tenant_a, approver, waited):
    services.intent_cancel(tenant=tenant_a, intent_id=waited.pk, actor=approver, reason="resend")
    SendIntent.objects.filter(pk=waited.pk).update(updated_at=timezone.now() - timedelta(days=8))

    tasks.retention_purge()

    assert DraftVersion.objects.get(pk=waited.draft_version_id).text == ""
