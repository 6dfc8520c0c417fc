"""What the draft page says about each recipient: an address holding letters outside ASCII is
named for what it holds, since on screen it can look exactly like another address. A domain has
an ASCII form and is stored and shown in it (common.addresses); a local part has none. The queue's
rows cannot name the letters: they mark such a draft, and its bulk approval leaves it to its page
(intents.policy.lookalike_recipients)."""

import pytest
from django.urls import reverse

from intents import errors, services
from intents.models import IntentEvent, SendIntent

pytestmark = pytest.mark.django_db

LOOKALIKE = "b\u0456lling@example.com"  # a Cyrillic small i (U+0456), not "billing"
LOOKALIKE_DOMAIN = "billing@ex\u0430mple.com"  # a Cyrillic small a, not "example.com"


def _recipient_rows(page) -> list[str]:
    body = page.content.decode()
    return body.split('<ul class="recipients">')[1].split("</ul>")[0].split("<li")[1:]


def test_a_lookalike_address_is_named_by_its_letters(
    tenant_a, mailbox_a, make_draft, admin_a, signed_in
):
    draft = make_draft(mailbox_a, to=["billing@example.com"], cc=[LOOKALIKE])

    page = signed_in(admin_a.user).get(reverse("draft", args=[tenant_a.slug, draft.pk]))

    plain, lookalike = _recipient_rows(page)
    assert "billing@example.com" in plain and "data-warning" not in plain
    assert LOOKALIKE in lookalike
    assert 'class="badge warn" data-warning="non_ascii"' in lookalike
    assert "U+0456 CYRILLIC SMALL LETTER BYELORUSSIAN-UKRAINIAN I" in lookalike
    # One to check first (bulk approval leaves it to this page for that), not refused.
    assert page.context["warning_count"] == 1
    assert "only to check" in page.content.decode()
    assert "are refused" not in page.content.decode()


def test_a_lookalike_domain_is_shown_as_the_domain_it_is(
    tenant_a, mailbox_a, make_draft, admin_a, signed_in
):
    draft = make_draft(mailbox_a, to=["billing@example.com"], cc=[LOOKALIKE_DOMAIN])

    page = signed_in(admin_a.user).get(reverse("draft", args=[tenant_a.slug, draft.pk]))

    plain, lookalike = _recipient_rows(page)
    assert "billing@example.com" in plain
    assert "billing@xn--exmple-4nf.com" in lookalike
    assert LOOKALIKE_DOMAIN not in page.content.decode()


def _item(draft) -> str:
    version = draft.versions.get()
    return f"{draft.pk}:{version.number}:{version.content_hash}"


def test_bulk_approval_leaves_a_lookalike_recipient_to_the_drafts_page(
    tenant_a, mailbox_a, make_draft, admin_a, signed_in
):
    """The queue approved it in bulk: its row showed "billing@example.com" and nobody was told
    that the i was Cyrillic. Now the row is marked, the draft is left out with the letter named
    and a link to its page, and it is approved there."""
    plain = make_draft(mailbox_a, to=["billing@example.com"])
    lookalike = make_draft(mailbox_a, to=["billing@example.com"], bcc=[LOOKALIKE])
    client = signed_in(admin_a.user)
    queue = client.get(reverse("tenant_home", args=[tenant_a.slug])).content.decode()
    rows = {row.split('href="')[1].split('"')[0]: row for row in queue.split("<article")[1:]}
    page_url = reverse("draft", args=[tenant_a.slug, lookalike.pk])

    response = client.post(
        reverse("bulk_approve", args=[tenant_a.slug]),
        {"item": [_item(plain), _item(lookalike)]},
        follow=True,
    )

    assert "data-lookalike" in rows[page_url]
    assert "data-lookalike" not in rows[reverse("draft", args=[tenant_a.slug, plain.pk])]
    body = response.content.decode()
    assert "Approved 1 draft" in body
    assert f"Draft {lookalike.pk} was not approved" in body
    assert "U+0456 CYRILLIC SMALL LETTER BYELORUSSIAN-UKRAINIAN I" in body
    assert f'<a href="{page_url}">' in body
    assert not SendIntent.objects.filter(draft=lookalike).exists()
    assert not IntentEvent.objects.filter(draft=lookalike, action="draft.approved").exists()
    assert IntentEvent.objects.get(draft=plain, action="draft.approved").data["from_list"] is True
    version = lookalike.versions.get()
    on_its_page = client.post(
        reverse("draft_approve", args=[tenant_a.slug, lookalike.pk]),
        {"version": version.number, "content_hash": version.content_hash},
    )
    assert on_its_page.status_code == 302
    assert (
        IntentEvent.objects.get(draft=lookalike, action="draft.approved").data["from_list"] is False
    )


def test_only_an_approval_from_a_list_refuses_a_lookalike_recipient(
    tenant_a, mailbox_a, make_draft, admin_a
):
    draft = make_draft(mailbox_a, to=["billing@example.com"], cc=[LOOKALIKE])
    version = draft.versions.get()
    seen = {"version": version.number, "content_hash": version.content_hash}

    with pytest.raises(errors.LookalikeRecipient) as refused:
        services.draft_approve(
            tenant=tenant_a, draft_id=draft.pk, actor=admin_a.user, unseen=True, **seen
        )

    assert LOOKALIKE in refused.value.message and "U+0456" in refused.value.message
    assert services.draft_approve(tenant=tenant_a, draft_id=draft.pk, actor=admin_a.user, **seen)


def test_the_recipients_to_check_filter_finds_a_draft_whose_only_warning_is_a_lookalike(
    tenant_a, mailbox_a, make_draft, admin_a, signed_in
):
    """The draft page counts a recipient not in plain ASCII among those to check; the queue's
    "Recipients to check" filter did not find that draft (its SQL knew only the policy and the
    thread), so a reviewer working through what to check never saw it."""
    lookalike = make_draft(mailbox_a, to=[LOOKALIKE], subject="Lookalike one")
    make_draft(mailbox_a, to=["billing@example.com"], subject="Clean one")
    client = signed_in(admin_a.user)

    draft_page = client.get(reverse("draft", args=[tenant_a.slug, lookalike.pk]))
    filtered = client.get(reverse("tenant_home", args=[tenant_a.slug]), {"warnings": "on"})

    assert draft_page.context["warning_count"] == 1
    rows = [row.pk for row in filtered.context["page"].rows]
    assert rows == [lookalike.pk]
    # Its row keeps its own badge, not the one for a recipient the policy refuses.
    assert "data-lookalike" in filtered.content.decode()
    assert "data-check-recipients" not in filtered.content.decode()
