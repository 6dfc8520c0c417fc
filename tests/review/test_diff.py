"""The diff a reviewer is shown between two versions covers the files as the hash does: a version
whose only change is an attachment's bytes, name or type is not "No difference in content"."""

import pytest
from django.urls import reverse

from intents import services
from intents.attachments import Upload
from intents.models import DraftVersion, SendIntent
from review.diff import version_diff

pytestmark = pytest.mark.django_db

LETTER = Upload("refund.txt", "text/plain", b"Refund: 20 EUR")


def _same_text_other_file(tenant, draft, actor, upload):
    version = DraftVersion.objects.get(draft=draft, number=draft.current_version)
    return services.draft_add_version(
        tenant=tenant,
        draft_id=draft.pk,
        to=version.to,
        cc=version.cc,
        bcc=version.bcc,
        subject=version.subject,
        text=version.text,
        html=version.html,
        actor_user=actor,
        attachments=[upload],
    )


def test_a_stale_approval_shows_the_file_that_changed_not_no_difference(
    tenant_a, mailbox_a, make_draft, admin_a, member_of, signed_in
):
    """The approver read version 1 (refund.txt saying 20 EUR); a colleague then replaced the
    file's bytes under the same name. The refusal's diff said "No difference in content", and
    the next click approved a file nobody had compared."""
    draft = make_draft(mailbox_a, attachments=[LETTER])
    seen = DraftVersion.objects.get(draft=draft, number=1)
    changed = _same_text_other_file(
        tenant_a, draft, admin_a.user, Upload("refund.txt", "text/plain", b"Refund: 2000 EUR")
    )
    assert changed.content_hash != seen.content_hash
    approver = member_of(tenant_a, "approver").user

    page = signed_in(approver).post(
        reverse("draft_approve", args=[tenant_a.slug, draft.pk]),
        {"version": 1, "content_hash": seen.content_hash},
    )

    body = page.content.decode()
    assert page.status_code == 409 and "Changed since you opened it" in body
    stale = body.split('class="stale-diff"')[1].split("</section>")[0]
    assert "No difference in content." not in stale
    files = stale.split("data-diff-files")[1].split("</p>")[0]
    assert files.count("refund.txt") == 2
    assert "<ins" in files and "<del" in files
    assert changed.attachments.get().sha256[:12] in files
    assert not SendIntent.objects.filter(draft=draft).exists()


def test_a_file_added_renamed_or_relabelled_is_a_difference(
    tenant_a, mailbox_a, make_draft, admin_a
):
    draft = make_draft(mailbox_a, attachments=[LETTER])
    renamed = _same_text_other_file(
        tenant_a, draft, admin_a.user, Upload("refund.html", "text/plain", LETTER.data)
    )
    first = DraftVersion.objects.get(draft=draft, number=1)

    diff = version_diff(first, renamed)

    assert [f.filename for f in diff.files_added] == ["refund.html"]
    assert [f.filename for f in diff.files_removed] == ["refund.txt"]
    assert diff.changed
    assert not version_diff(first, first).changed
