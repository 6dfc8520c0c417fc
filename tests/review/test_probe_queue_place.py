"""The queue's place tried from outside its happy path: a tab followed from a page reached with
"previous" opens that view's first page (not a page before a cursor of another view), and a bulk
approval made in a view returns to that view."""

import re
from html import unescape

import pytest
from django.urls import reverse
from django.utils import timezone

from intents.models import Draft
from intents.selectors.common import encode_cursor

pytestmark = pytest.mark.django_db


def _tab_href(html: str, view: str) -> str:
    found = re.search(rf'<a href="([^"]*)"[^>]*data-view="{view}"', html)
    assert found is not None
    return unescape(found[1])


def test_a_view_tab_opens_the_first_page_of_that_view_even_from_a_previous_page(
    tenant_a, mailbox_a, make_draft, admin_a, signed_in
):
    oldest, middle = make_draft(mailbox_a), make_draft(mailbox_a)
    escalated = make_draft(mailbox_a)
    Draft.objects.filter(pk=escalated.pk).update(escalated_at=timezone.now())
    client = signed_in(admin_a.user)
    # The page before `middle` in the whole queue, as its "previous" link opens it.
    before = encode_cursor("oldest", Draft.objects.get(pk=middle.pk).created_at, middle.pk)
    page = client.get(reverse("tenant_home", args=[tenant_a.slug]), {"before": before})
    assert page.status_code == 200
    assert f'href="/t/tenant-a/drafts/{oldest.pk}/"' in page.content.decode()
    # The cursor took effect (a refused one would show the first page, and prove nothing).
    assert f'href="/t/tenant-a/drafts/{middle.pk}/"' not in page.content.decode()

    tab = client.get(_tab_href(page.content.decode(), "escalated"))

    assert tab.status_code == 200
    assert f'href="/t/tenant-a/drafts/{escalated.pk}/"' in tab.content.decode()


def test_bulk_approve_returns_to_the_view_it_was_made_in(
    tenant_a, mailbox_a, make_draft, admin_a, signed_in
):
    draft = make_draft(mailbox_a)
    version = draft.versions.get()
    client = signed_in(admin_a.user)
    queue = client.get(reverse("tenant_home", args=[tenant_a.slug]), {"view": "unassigned"})
    place = re.search(r'name="place" value="([^"]*)"', queue.content.decode())
    assert place is not None

    response = client.post(
        reverse("bulk_approve", args=[tenant_a.slug]),
        {
            "item": f"{draft.pk}:{version.number}:{version.content_hash}",
            "place": unescape(place[1]),
        },
    )

    assert response.status_code == 302
    assert response["Location"] == "/t/tenant-a/?view=unassigned"
