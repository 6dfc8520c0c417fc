"""The edit page: browsers submit textareas with CRLF line endings; a one-word edit must show as a
one-word change."""

import pytest
from django.urls import reverse

from intents import review
from intents.hashing import content_hash
from intents.models import DraftVersion

pytestmark = pytest.mark.django_db


def edit_data(version, **changes):
    data = {
        "base_version": version.number,
        "to": ", ".join(version.to),
        "cc": ", ".join(version.cc),
        "bcc": ", ".join(version.bcc),
        "subject": version.subject,
        "text": version.text,
        "html": version.html,
    }
    data.update(changes)
    return data


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
