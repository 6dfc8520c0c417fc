"""What the draft page says about each recipient: an address holding letters outside ASCII is
named for what it holds, since on screen it can look exactly like another address. A domain has
an ASCII form and is stored and shown in it (common.addresses); a local part has none."""

import pytest
from django.urls import reverse

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
    assert "billing@example.com" in plain and "data-note" not in plain
    assert LOOKALIKE in lookalike
    assert 'data-note="non_ascii"' in lookalike
    assert "U+0456 CYRILLIC SMALL LETTER BYELORUSSIAN-UKRAINIAN I" in lookalike
    assert page.context["warning_count"] == 0


def test_a_lookalike_domain_is_shown_as_the_domain_it_is(
    tenant_a, mailbox_a, make_draft, admin_a, signed_in
):
    draft = make_draft(mailbox_a, to=["billing@example.com"], cc=[LOOKALIKE_DOMAIN])

    page = signed_in(admin_a.user).get(reverse("draft", args=[tenant_a.slug, draft.pk]))

    plain, lookalike = _recipient_rows(page)
    assert "billing@example.com" in plain
    assert "billing@xn--exmple-4nf.com" in lookalike
    assert LOOKALIKE_DOMAIN not in page.content.decode()
