"""The edit page: a save is based on the version the person opened; a save that lost a race is a
conflict shown with what changed, and the person's text is kept. Browsers submit textareas with
CRLF line endings; a one-word edit must show as a one-word change."""

import threading

import pytest
from django.db import connections, transaction
from django.test import Client
from django.urls import reverse

from intents import services
from intents.hashing import content_hash
from intents.models import DraftVersion, IntentEvent
from review import diff as review  # the tests below name the diff functions review.*
from review.forms import EditForm
from tenants.tokens import token_create
from tests.intents.helpers import blocked_on_a_lock, run_concurrently

pytestmark = pytest.mark.django_db


def edit_data(version, **changes):
    """The edit form as the page fills it for ``version``, with ``changes``."""
    return {**EditForm.of_version(version).initial, **changes}


@pytest.mark.django_db(transaction=True)
def test_an_agent_revision_landing_during_the_save_is_a_conflict_that_keeps_the_persons_text(
    tenant_a, mailbox_a, make_draft, admin_a
):
    draft = make_draft(mailbox_a, text="We refunded your order today.")
    first = draft.versions.get()
    token, _ = token_create(
        tenant=tenant_a, name="agent", scopes=["drafts:write"], mailbox_ids=[], actor=admin_a.user
    )
    url = reverse("draft_edit", args=[tenant_a.slug, draft.pk])
    responses: list = []

    def person_saves() -> None:
        try:
            client = Client()
            client.force_login(admin_a.user, backend="django.contrib.auth.backends.ModelBackend")
            responses.append(client.post(url, edit_data(first, text="My careful wording.")))
        finally:
            connections.close_all()

    with transaction.atomic():
        # The agent's revision holds the draft's lock when the person's save (of version 1)
        # arrives: the page already checked its base against version 1, the only one committed.
        services.draft_add_version(
            tenant=tenant_a,
            draft_id=draft.pk,
            to=list(first.to),
            cc=[],
            bcc=[],
            subject=first.subject,
            text="We refunded half of your order today.",
            html="",
            agent_token=token,
        )
        person = threading.Thread(target=person_saves)
        person.start()
        assert blocked_on_a_lock(), "the person's save never waited for the draft's lock"
    person.join(30)

    page = responses[0]
    body = page.content.decode()
    assert page.status_code == 409
    assert "Someone saved version 2 while you were editing version 1" in body
    assert "We refunded<ins> half of</ins> your order today." in body
    assert "My careful wording.</textarea>" in body
    assert list(draft.versions.order_by("number").values_list("number", "author_kind")) == [
        (1, "person"),
        (2, "agent"),
    ]


def _someone_saved_version_2(tenant, mailbox, make_draft, actor):
    """A draft whose version 2 someone saved over version 1; returns it and version 1 (what a
    page opened before that save shows)."""
    draft = make_draft(mailbox, text="We refunded your order today.")
    first = draft.versions.get()
    services.draft_add_version(
        tenant=tenant,
        draft_id=draft.pk,
        to=list(first.to),
        cc=[],
        bcc=[],
        subject=first.subject,
        text="Someone else's text.",
        html="",
        actor_user=actor,
        base_version=1,
    )
    return draft, first


def test_after_a_conflict_saving_again_is_based_on_the_version_shown(
    tenant_a, mailbox_a, make_draft, admin_a, signed_in
):
    draft, first = _someone_saved_version_2(tenant_a, mailbox_a, make_draft, admin_a.user)
    client = signed_in(admin_a.user)
    url = reverse("draft_edit", args=[tenant_a.slug, draft.pk])

    conflict = client.post(url, edit_data(first, text="Mine."))
    again = client.post(url, {**edit_data(first, text="Mine."), "base_version": 2})

    assert conflict.status_code == 409
    assert b'name="base_version" value="2"' in conflict.content
    assert again.status_code == 302
    saved = DraftVersion.objects.get(draft=draft, number=3)
    assert saved.text == "Mine."
    event = IntentEvent.objects.get(draft=draft, action="draft.version_added", data__version=3)
    assert event.data["base_version"] == 2


def test_the_conflict_is_told_whole_in_the_persons_language(
    tenant_a, mailbox_a, make_draft, admin_a, signed_in
):
    """The refusal's second half was an English f-string beside the translated first half."""
    admin_a.user.language = "de"
    admin_a.user.save(update_fields=["language"])
    draft, first = _someone_saved_version_2(tenant_a, mailbox_a, make_draft, admin_a.user)
    client = signed_in(admin_a.user)

    conflict = client.post(
        reverse("draft_edit", args=[tenant_a.slug, draft.pk]), edit_data(first, text="Mine.")
    )

    body = conflict.content.decode()
    assert conflict.status_code == 409
    assert "Nichts wurde gespeichert. Was sich seit Version 1 geändert hat" in body
    assert "Nothing was saved" not in body


def test_a_browser_edit_with_crlf_line_endings_shows_only_the_changed_word(
    tenant_a, mailbox_a, make_draft, admin_a, signed_in
):
    draft = make_draft(mailbox_a, text="Hello,\n\nWe refunded your order today.\n\nBest regards")
    first = draft.versions.get()
    client = signed_in(admin_a.user)
    submitted = "Hello,\r\n\r\nWe refunded your order yesterday.\r\n\r\nBest regards"

    saved = client.post(
        reverse("draft_edit", args=[tenant_a.slug, draft.pk]), edit_data(first, text=submitted)
    )
    page = client.get(reverse("draft", args=[tenant_a.slug, draft.pk]))

    second = DraftVersion.objects.get(draft=draft, number=2)
    expected = (
        "Hello,\n\nWe refunded your order <del>today.</del><ins>yesterday.</ins>\n\nBest regards"
    )
    assert saved.status_code == 302
    assert second.text == "Hello,\n\nWe refunded your order yesterday.\n\nBest regards"
    assert second.content_hash == content_hash(
        mailbox_id=mailbox_a.pk,
        to=second.to,
        cc=[],
        bcc=[],
        subject=second.subject,
        text="Hello,\n\nWe refunded your order yesterday.\n\nBest regards",
        html="",
        in_reply_to="",
    )
    assert review.version_diff(first, second).text == expected
    assert expected in page.content.decode()


def test_saving_the_form_unchanged_from_a_browser_keeps_the_content_hash(
    tenant_a, mailbox_a, make_draft, admin_a, signed_in
):
    draft = make_draft(mailbox_a, html="<p>Hello,</p>\n<p>refunded.</p>\n")
    first = draft.versions.get()

    signed_in(admin_a.user).post(
        reverse("draft_edit", args=[tenant_a.slug, draft.pk]),
        edit_data(
            first,
            text=first.text.replace("\n", "\r\n"),
            html=first.html.replace("\n", "\r\n"),
        ),
    )

    assert DraftVersion.objects.get(draft=draft, number=2).content_hash == first.content_hash


def test_the_word_diff_of_a_version_stored_with_crlf_marks_only_the_changed_word():
    # Versions saved before bodies were normalised at the service boundary still hold CRLF.
    diff = review.word_diff("Hello,\r\n\r\nRefunded today.\r\nBye", "Hello,\n\nRefunded now.\nBye")

    assert diff == "Hello,\n\nRefunded <del>today.</del><ins>now.</ins>\nBye"


def test_a_base_version_the_draft_never_had_is_refused_with_a_visible_message(
    tenant_a, mailbox_a, make_draft, admin_a, signed_in
):
    draft = make_draft(mailbox_a)
    client = signed_in(admin_a.user)
    url = reverse("draft_edit", args=[tenant_a.slug, draft.pk])
    first = draft.versions.get()

    ahead = client.post(url, edit_data(first, base_version=9, text="Mine."))
    missing = client.post(url, {k: v for k, v in edit_data(first).items() if k != "base_version"})

    assert ahead.status_code == 400
    assert b"This draft has no version 9; version 1 is current." in ahead.content
    assert missing.status_code == 400
    assert b"The form did not say which version you edited" in missing.content
    assert draft.versions.count() == 1


def test_the_same_save_posted_twice_answers_saved_both_times_and_adds_one_version(
    tenant_a, mailbox_a, make_draft, admin_a, signed_in
):
    """A double click (or a post repeated after a slow answer) sent the same save again: the
    second one answered "Someone saved version 2 while you were editing version 1. Nothing was
    saved", about the person's own save, and its page showed their own change as a colleague's."""
    draft = make_draft(mailbox_a, text="We refunded your order today.")
    first = draft.versions.get()
    client = signed_in(admin_a.user)
    url = reverse("draft_edit", args=[tenant_a.slug, draft.pk])
    data = edit_data(first, text="My careful wording.")

    one = client.post(url, data)
    two = client.post(url, data, follow=True)

    assert one.status_code == 302
    assert two.redirect_chain == [(reverse("draft", args=[tenant_a.slug, draft.pk]), 302)]
    assert "Saved version 2." in two.content.decode()
    assert "Someone saved" not in two.content.decode()
    assert list(draft.versions.order_by("number").values_list("number", "text")) == [
        (1, "We refunded your order today."),
        (2, "My careful wording."),
    ]
    assert IntentEvent.objects.filter(draft=draft, action="draft.version_added").count() == 1


def test_a_colleagues_identical_save_on_the_same_base_is_still_a_conflict(
    tenant_a, mailbox_a, make_draft, admin_a, member_of, signed_in
):
    """Only the person's own repeat is the same save: a colleague who typed the same words
    is told that someone saved first (their version would carry their name)."""
    draft = make_draft(mailbox_a, text="We refunded your order today.")
    first = draft.versions.get()
    url = reverse("draft_edit", args=[tenant_a.slug, draft.pk])
    data = edit_data(first, text="My careful wording.")
    colleague = member_of(tenant_a, "approver").user

    signed_in(colleague).post(url, data)
    mine = signed_in(admin_a.user).post(url, data)

    assert mine.status_code == 409
    assert "Someone saved version 2 while you were editing version 1" in mine.content.decode()
    assert draft.versions.count() == 2


@pytest.mark.django_db(transaction=True)
def test_a_double_click_posting_the_save_twice_at_once_adds_one_version(
    tenant_a, mailbox_a, make_draft, admin_a
):
    draft = make_draft(mailbox_a, text="We refunded your order today.")
    first = draft.versions.get()
    url = reverse("draft_edit", args=[tenant_a.slug, draft.pk])
    data = edit_data(first, text="My careful wording.")

    def post(_i: int):
        client = Client()
        client.force_login(admin_a.user, backend="django.contrib.auth.backends.ModelBackend")
        return client.post(url, data).status_code

    assert run_concurrently(post, 2) == [302, 302]
    assert list(draft.versions.order_by("number").values_list("number", flat=True)) == [1, 2]
