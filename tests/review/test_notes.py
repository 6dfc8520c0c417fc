"""Internal notes on a draft: the service (who may write, bad input, the journal row) and the
draft page (interleaved with the journal in time order, kept text on a refusal)."""

import pytest
from django.urls import reverse

from intents import errors, services
from intents.hashing import content_hash
from intents.models import DraftNote, DraftVersion, IntentEvent

pytestmark = pytest.mark.django_db


def note(draft, author, text):
    return services.draft_note_add(tenant=draft.tenant, draft_id=draft.pk, author=author, text=text)


def test_a_note_is_stored_journaled_and_changes_nothing_approved(mailbox_a, make_draft, admin_a):
    draft = make_draft(mailbox_a)
    version = draft.versions.get()
    written = note(draft, admin_a.user, "  Customer called: the refund is for order 2.  ")
    assert written.text == "Customer called: the refund is for order 2."
    event = IntentEvent.objects.get(draft=draft, action="draft.note_added")
    assert (event.actor_user, event.data["note_id"]) == (admin_a.user, written.pk)
    # The note is in no version and in no hash.
    assert DraftVersion.objects.filter(draft=draft).count() == 1
    assert version.content_hash == content_hash(
        mailbox_id=mailbox_a.pk,
        in_reply_to=draft.in_reply_to,
        to=version.to,
        cc=version.cc,
        bcc=version.bcc,
        subject=version.subject,
        text=version.text,
        html=version.html,
    )
    assert "order 2" not in event.reason + str(event.data)


@pytest.mark.parametrize(
    ("text", "code"),
    [
        ("", "note_empty"),
        ("   \n\t ", "note_empty"),
        (None, "note_empty"),
        ("x" * 2001, "note_too_long"),
        ("bad\x00byte", "note_unstorable"),
        ("lone \ud800 surrogate", "note_unstorable"),
    ],
)
def test_bad_notes_are_refused_and_write_nothing(mailbox_a, make_draft, admin_a, text, code):
    draft = make_draft(mailbox_a)
    before = IntentEvent.objects.count()
    with pytest.raises(errors.InvalidInput) as refused:
        note(draft, admin_a.user, text)
    assert (refused.value.code, refused.value.field) == (code, "text")
    assert not DraftNote.objects.exists()
    assert IntentEvent.objects.count() == before


def test_the_longest_note_fits(mailbox_a, make_draft, admin_a):
    assert len(note(make_draft(mailbox_a), admin_a.user, "y" * 2000).text) == 2000


def test_a_note_posted_with_crlf_line_breaks_is_counted_and_kept_with_lf(
    mailbox_a, make_draft, admin_a
):
    """A browser posts a textarea's line breaks as CRLF; its maxlength counts each as one."""
    lines = ["y" * 49] * 40
    posted = "\r\n".join(lines[:-1]) + "\r" + lines[-1]
    assert len(posted) > 2000
    assert note(make_draft(mailbox_a), admin_a.user, posted).text == "\n".join(lines)


def test_a_viewer_may_not_write_a_note(mailbox_a, make_draft, member_of):
    draft = make_draft(mailbox_a)
    viewer = member_of(mailbox_a.tenant, "viewer").user
    with pytest.raises(errors.NoRight):
        note(draft, viewer, "hello")
    assert not DraftNote.objects.exists()


def test_an_approver_without_the_mailbox_right_may_write_a_note(mailbox_a, make_draft, member_of):
    limited = member_of(mailbox_a.tenant, "approver", approve_all_mailboxes=False).user
    assert note(make_draft(mailbox_a), limited, "I know this customer").author == limited


def test_another_tenants_draft_is_not_found(mailbox_a, make_draft, tenant_b, member_of):
    draft = make_draft(mailbox_a)
    outsider = member_of(tenant_b, "admin").user
    for draft_id in (draft.pk, "x", None):
        with pytest.raises(errors.NotFound):
            services.draft_note_add(tenant=tenant_b, draft_id=draft_id, author=outsider, text="hi")
    # A member of A who is not a member of B is not a writer there either.
    with pytest.raises(errors.NoRight):
        services.draft_note_add(
            tenant=tenant_b, draft_id=draft.pk, author=draft.created_by, text="hi"
        )
    assert not DraftNote.objects.exists()


def test_the_draft_page_interleaves_notes_with_the_journal(
    tenant_a, mailbox_a, make_draft, admin_a, member_of, signed_in
):
    draft = make_draft(mailbox_a)
    note(draft, admin_a.user, "First look: the amount is right.")
    services.draft_add_version(
        tenant=tenant_a,
        draft_id=draft.pk,
        to=["customer@example.com"],
        cc=[],
        bcc=[],
        subject="Your refund",
        text="Hello, <b>we</b> refunded it.",
        html="",
        actor_user=admin_a.user,
    )
    note(draft, admin_a.user, "Second look <script>x</script>\nafter the edit.")
    viewer = signed_in(member_of(tenant_a, "viewer").user)
    page = viewer.get(reverse("draft", args=[tenant_a.slug, draft.pk])).content.decode()
    first = page.index("First look")
    edit = page.index("draft.version_added")
    second = page.index("Second look")
    assert first < edit < second
    assert "&lt;script&gt;x&lt;/script&gt;<br>after the edit." in page
    assert "draft.note_added" not in page  # shown as the note itself, not twice
    assert 'name="text"' not in page.split('id="notes"')[1]  # a viewer has no note form


def test_posting_a_note_from_the_page(tenant_a, mailbox_a, make_draft, admin_a, signed_in):
    draft = make_draft(mailbox_a)
    client = signed_in(admin_a.user)
    url = reverse("draft_note_add", args=[tenant_a.slug, draft.pk])
    response = client.post(url, {"text": "Checked with billing."})
    assert response.status_code == 302 and response["Location"].endswith("#notes")
    assert DraftNote.objects.get().text == "Checked with billing."


def test_a_refused_note_keeps_its_text_and_says_why(
    tenant_a, mailbox_a, make_draft, admin_a, signed_in
):
    draft = make_draft(mailbox_a)
    url = reverse("draft_note_add", args=[tenant_a.slug, draft.pk])
    long_text = "z" * 2001
    response = signed_in(admin_a.user).post(url, {"text": long_text})
    assert response.status_code == 400
    page = response.content.decode()
    assert "at most 2000 characters" in page and long_text in page
    assert 'aria-invalid="true"' in page
    assert signed_in(admin_a.user).post(url, {"text": ""}).status_code == 400
    assert not DraftNote.objects.exists()


def test_note_route_refuses_viewers_and_other_tenants(
    tenant_a, tenant_b, mailbox_a, make_draft, member_of, signed_in
):
    draft = make_draft(mailbox_a)
    viewer = signed_in(member_of(tenant_a, "viewer").user)
    assert (
        viewer.post(
            reverse("draft_note_add", args=[tenant_a.slug, draft.pk]), {"text": "x"}
        ).status_code
        == 403
    )
    outsider = signed_in(member_of(tenant_b, "admin").user)
    assert (
        outsider.post(
            reverse("draft_note_add", args=[tenant_b.slug, draft.pk]), {"text": "x"}
        ).status_code
        == 404
    )
    assert not DraftNote.objects.exists()


def test_notes_go_with_the_bodies_at_the_retention_purge(mailbox_a, make_draft, admin_a):
    from datetime import timedelta

    from django.db.models.functions import Now

    from intents.models import Draft
    from intents.retention import draft_bodies_purge

    old, fresh = make_draft(mailbox_a), make_draft(mailbox_a)
    for draft in (old, fresh):
        note(draft, admin_a.user, "The customer's phone number is in the ticket.")
        services.draft_reject(
            tenant=draft.tenant, draft_id=draft.pk, reason="no", actor=admin_a.user
        )
    Draft.objects.filter(pk=old.pk).update(updated_at=Now() - timedelta(days=91))
    assert draft_bodies_purge() == 1
    assert list(DraftNote.objects.values_list("draft_id", flat=True)) == [fresh.pk]


def _purged(draft, actor):
    """The draft rejected and its bodies purged by the retention policy."""
    from datetime import timedelta

    from django.db.models.functions import Now

    from intents.models import Draft
    from intents.retention import draft_bodies_purge

    services.draft_reject(tenant=draft.tenant, draft_id=draft.pk, reason="no", actor=actor)
    Draft.objects.filter(pk=draft.pk).update(updated_at=Now() - timedelta(days=91))
    assert draft_bodies_purge() == 1


def test_a_note_on_a_purged_draft_is_refused_and_kept_nowhere(mailbox_a, make_draft, admin_a):
    """Notes may quote the customer and go with the bodies; a note added after the purge was
    stored and kept for good (the purge never comes back to a purged draft)."""
    draft = make_draft(mailbox_a)
    _purged(draft, admin_a.user)

    with pytest.raises(errors.InvalidInput) as refused:
        note(draft, admin_a.user, "Her phone number is +34 600 000 000.")

    assert refused.value.code == "note_after_purge"
    assert not DraftNote.objects.exists()
    assert not IntentEvent.objects.filter(action="draft.note_added").exists()


def test_a_purged_drafts_page_offers_no_note_box(
    tenant_a, mailbox_a, make_draft, admin_a, signed_in
):
    draft = make_draft(mailbox_a)
    _purged(draft, admin_a.user)
    client = signed_in(admin_a.user)

    page = client.get(reverse("draft", args=[tenant_a.slug, draft.pk])).content.decode()
    posted = client.post(reverse("draft_note_add", args=[tenant_a.slug, draft.pk]), {"text": "x"})

    assert 'name="text"' not in page
    assert posted.status_code == 400
    assert "a note cannot be added any more" in posted.content.decode()
    assert not DraftNote.objects.exists()


@pytest.mark.django_db(transaction=True)
def test_a_note_posted_while_the_purge_runs_goes_with_it_or_is_refused(
    mailbox_a, make_draft, admin_a
):
    from datetime import timedelta

    from django.db import transaction
    from django.db.models.functions import Now

    from intents.models import Draft
    from intents.retention import draft_bodies_purge
    from tests.intents.helpers import blocked_on_a_lock, in_thread

    draft = make_draft(mailbox_a)
    services.draft_reject(tenant=draft.tenant, draft_id=draft.pk, reason="no", actor=admin_a.user)
    Draft.objects.filter(pk=draft.pk).update(updated_at=Now() - timedelta(days=91))
    outcome: list = []
    with transaction.atomic():
        assert draft_bodies_purge() == 1
        writer = in_thread(lambda: note(draft, admin_a.user, "Her phone is +34 600."), outcome)
        assert blocked_on_a_lock(), "the note never waited for the purge"
    writer.join(30)

    assert isinstance(outcome[0], errors.InvalidInput)
    assert not DraftNote.objects.exists()
