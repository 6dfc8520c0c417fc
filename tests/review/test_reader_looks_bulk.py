"""A draft whose HTML shows otherwise to some readers (a phone's width, dark mode:
intents.html_styles.reader_looks) is approved on its page, where those looks are named and the
phone's shown; a list's row shows neither, so bulk approval leaves it out, as it does a
look-alike address."""

import pytest
from django.urls import reverse

from intents import errors, services
from intents.models import IntentEvent, SendIntent

pytestmark = pytest.mark.django_db

# Only a phone reader sees the second sentence.
PHONE_ONLY = (
    "<style>.m{display:none} @media (max-width: 600px){.m{display:block}}</style>"
    "<p>Your refund is on its way.</p><p class=m>Reply with your card number.</p>"
)
SAME_FOR_ALL = "<style>p{color:#333}</style><p>Your refund is on its way.</p>"


def _item(draft) -> str:
    version = draft.versions.get()
    return f"{draft.pk}:{version.number}:{version.content_hash}"


def test_bulk_approval_leaves_html_that_shows_otherwise_to_some_readers_to_its_page(
    tenant_a, mailbox_a, make_draft, admin_a, signed_in
):
    """The queue approved it in bulk: its row showed a subject and an address, and nobody saw
    the sentence only phone readers get. Now the row is marked, the draft is left out with the
    readers named and a link to its page, and it is approved there."""
    plain = make_draft(mailbox_a, html=SAME_FOR_ALL)
    phone = make_draft(mailbox_a, html=PHONE_ONLY)
    client = signed_in(admin_a.user)
    queue = client.get(reverse("tenant_home", args=[tenant_a.slug])).content.decode()
    rows = {row.split('href="')[1].split('"')[0]: row for row in queue.split("<article")[1:]}
    page_url = reverse("draft", args=[tenant_a.slug, phone.pk])

    response = client.post(
        reverse("bulk_approve", args=[tenant_a.slug]),
        {"item": [_item(plain), _item(phone)]},
        follow=True,
    )

    assert "data-reader-looks" in rows[page_url]
    assert "phone-width screens" in rows[page_url]
    assert "data-reader-looks" not in rows[reverse("draft", args=[tenant_a.slug, plain.pk])]
    body = response.content.decode()
    assert "Approved 1 draft" in body
    assert f"Draft {phone.pk} was not approved" in body
    assert "phone-width screens" in body and "open the draft" in body
    assert f'<a href="{page_url}">' in body
    assert not SendIntent.objects.filter(draft=phone).exists()
    assert not IntentEvent.objects.filter(draft=phone, action="draft.approved").exists()
    version = phone.versions.get()
    on_its_page = client.post(
        reverse("draft_approve", args=[tenant_a.slug, phone.pk]),
        {"version": version.number, "content_hash": version.content_hash},
    )
    assert on_its_page.status_code == 302
    assert IntentEvent.objects.get(draft=phone, action="draft.approved").data["from_list"] is False


def test_only_an_approval_from_a_list_refuses_html_that_shows_otherwise_to_some_readers(
    tenant_a, mailbox_a, make_draft, admin_a
):
    draft = make_draft(
        mailbox_a,
        html=PHONE_ONLY + "<style>@media (prefers-color-scheme: dark){.m{display:block}}</style>",
    )
    version = draft.versions.get()
    seen = {"version": version.number, "content_hash": version.content_hash}

    with pytest.raises(errors.ReaderDependentStyles) as refused:
        services.draft_approve(
            tenant=tenant_a, draft_id=draft.pk, actor=admin_a.user, unseen=True, **seen
        )

    assert refused.value.code == "reader_dependent_styles"
    assert "phone-width screens, dark mode and inbox previews" in refused.value.message
    assert not SendIntent.objects.filter(draft=draft).exists()
    assert services.draft_approve(tenant=tenant_a, draft_id=draft.pk, actor=admin_a.user, **seen)
