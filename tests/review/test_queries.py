"""What the draft page says about each recipient: an address holding letters outside ASCII is
named for what it holds, since on screen it can look exactly like another address."""

import pytest
from django.urls import reverse

pytestmark = pytest.mark.django_db

LOOKALIKE = "billing@ex\u0430mple.com"  # a Cyrillic small a, not "example.com"


def test_a_lookalike_address_is_named_by_its_letters(
    tenant_a, mailbox_a, make_draft, admin_a, signed_in
):
    draft = make_draft(mailbox_a, to=["billing@example.com"], cc=[LOOKALIKE])

    page = signed_in(admin_a.user).get(reverse("draft", args=[tenant_a.slug, draft.pk]))

    body = page.content.decode()
    rows = body.split('<ul class="recipients">')[1].split("</ul>")[0].split("<li")[1:]
    plain, lookalike = rows
    assert "billing@example.com" in plain and "data-note" not in plain
    assert LOOKALIKE in lookalike
    assert 'data-note="non_ascii"' in lookalike
    assert "U+0430 CYRILLIC SMALL LETTER A" in lookalike
    assert page.context["warning_count"] == 0
