"""What the draft services store and hash: bodies with LF line endings, whatever the client sent
(browsers submit textareas with CRLF), so an unchanged body keeps its hash across clients."""

import pytest

from intents import errors, services
from intents.hashing import content_hash, version_hash

pytestmark = pytest.mark.django_db


def _hash(mailbox, text, html):
    return content_hash(
        mailbox_id=mailbox.pk,
        to=["customer@example.com"],
        cc=[],
        bcc=[],
        subject="Your refund",
        text=text,
        html=html,
        in_reply_to="",
    )


def test_create_stores_and_hashes_bodies_with_lf_line_endings(new_draft, local_mailbox):
    draft = new_draft(text="Hello,\r\n\r\nRefunded.\rBye\r\n", html="<p>a</p>\r\n<p>b</p>\r")

    version = draft.versions.get()
    assert (version.text, version.html) == ("Hello,\n\nRefunded.\nBye\n", "<p>a</p>\n<p>b</p>\n")
    assert version.content_hash == _hash(local_mailbox, version.text, version.html)
    assert version_hash(version) == version.content_hash


def test_a_revision_that_differs_only_in_line_endings_keeps_the_hash(tenant_a, new_draft, approver):
    draft = new_draft(text="Hello,\n\nRefunded.\n", html="<p>a</p>\n")

    version = services.draft_add_version(
        tenant=tenant_a,
        draft_id=draft.pk,
        to=["customer@example.com"],
        cc=[],
        bcc=[],
        subject="Your refund",
        text="Hello,\r\n\r\nRefunded.\r\n",
        html="<p>a</p>\r",
        actor_user=approver,
    )

    assert "\r" not in version.text + version.html
    assert version.content_hash == draft.versions.get(number=1).content_hash


def test_a_body_of_line_breaks_only_is_still_refused_as_empty(new_draft):
    with pytest.raises(errors.InvalidInput) as refused:
        new_draft(text="\r\n\r\n", html="\r")

    assert refused.value.code == "body_required"


@pytest.mark.parametrize(
    ("to", "field", "named"),
    [
        (["customer@example.com\r\n"], "to[0]", "U+000D CARRIAGE RETURN"),
        (["ok@example.com", "\u00a0customer@example.com"], "to[1]", "U+00A0 NO-BREAK SPACE"),
        (["customer@example.com\u2029"], "to[0]", "U+2029 PARAGRAPH SEPARATOR"),
    ],
)
def test_a_recipient_with_white_space_other_than_a_space_is_refused_not_stripped(
    new_draft, to, field, named
):
    """The service stripped it (str.strip) and stored another address than it was given, for
    any caller; plain spaces around one still pass."""
    with pytest.raises(errors.InvalidInput) as refused:
        new_draft(to=to)

    assert (refused.value.code, refused.value.field) == ("recipient_invalid", field)
    assert refused.value.message.startswith(f"{field} holds {named}: ")


def test_spaces_around_a_recipient_still_pass(new_draft):
    assert new_draft(to=["  customer@example.com "]).versions.get().to == ["customer@example.com"]
