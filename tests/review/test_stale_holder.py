"""Release and hand from a draft page loaded before the draft changed hands: the page named one
holder, the draft now has another. The post is refused with what happened and changes nothing;
it passed on the new holder's work, which the admin never saw."""

from __future__ import annotations

import re

import pytest
from django.urls import reverse

from intents import services
from intents.models import Draft, IntentEvent

pytestmark = pytest.mark.django_db


def form_fields(page: str, action: str) -> dict:
    """The hidden fields of the page's form that posts to ``action``, as the page drew them."""
    form = re.search(
        rf'<form method="post" action="{re.escape(action)}"[^>]*>(.*?)</form>', page, re.S
    )
    fields = dict(re.findall(r'<input type="hidden" name="(\w+)" value="([^"]*)"', form.group(1)))
    fields.pop("csrfmiddlewaretoken", None)
    return fields


@pytest.fixture
def people(tenant_a, member_of):
    return {
        "ben": member_of(tenant_a, "approver", user__full_name="Ben Holder").user,
        "cara": member_of(tenant_a, "approver", user__full_name="Cara Later").user,
        "dan": member_of(tenant_a, "approver", user__full_name="Dan Other").user,
    }


@pytest.fixture
def changed_hands(tenant_a, mailbox_a, make_draft, admin_a, people, client):
    """Ben held the draft when the admin's page was drawn; then he released it and Cara took it."""
    draft = make_draft(mailbox_a)
    services.draft_take(tenant=tenant_a, draft_id=draft.pk, actor=people["ben"])
    client.force_login(admin_a.user)
    page = client.get(reverse("draft", args=[tenant_a.slug, draft.pk])).content.decode()
    assert "Ben Holder holds this draft." in page
    services.draft_release(tenant=tenant_a, draft_id=draft.pk, actor=people["ben"])
    services.draft_take(tenant=tenant_a, draft_id=draft.pk, actor=people["cara"])
    return draft, page


def test_a_release_from_a_page_that_showed_another_holder_is_refused(
    tenant_a, changed_hands, people, client
):
    draft, page = changed_hands
    url = reverse("draft_release", args=[tenant_a.slug, draft.pk])
    events = IntentEvent.objects.filter(draft=draft).count()
    response = client.post(url, form_fields(page, url), follow=True)
    assert "Cara Later holds this draft now" in response.content.decode()
    assert Draft.objects.get(pk=draft.pk).assignee == people["cara"]
    assert IntentEvent.objects.filter(draft=draft).count() == events


def test_a_hand_over_from_a_page_that_showed_another_holder_is_refused(
    tenant_a, changed_hands, people, client
):
    draft, page = changed_hands
    url = reverse("draft_hand", args=[tenant_a.slug, draft.pk])
    events = IntentEvent.objects.filter(draft=draft).count()
    fields = {**form_fields(page, url), "to": str(people["dan"].pk)}
    response = client.post(url, fields, follow=True)
    assert "Cara Later holds this draft now" in response.content.decode()
    assert Draft.objects.get(pk=draft.pk).assignee == people["cara"]
    assert IntentEvent.objects.filter(draft=draft).count() == events


def test_a_hand_over_from_a_page_that_showed_nobody_is_refused_once_someone_took_it(
    tenant_a, mailbox_a, make_draft, admin_a, people, client
):
    draft = make_draft(mailbox_a)
    client.force_login(admin_a.user)
    page = client.get(reverse("draft", args=[tenant_a.slug, draft.pk])).content.decode()
    services.draft_take(tenant=tenant_a, draft_id=draft.pk, actor=people["cara"])
    url = reverse("draft_hand", args=[tenant_a.slug, draft.pk])
    fields = {**form_fields(page, url), "to": str(people["dan"].pk)}
    response = client.post(url, fields, follow=True)
    assert "Cara Later holds this draft now" in response.content.decode()
    assert Draft.objects.get(pk=draft.pk).assignee == people["cara"]


def test_the_holder_the_page_showed_still_holding_it_is_released_and_handed(
    tenant_a, mailbox_a, make_draft, admin_a, people, client
):
    draft = make_draft(mailbox_a)
    services.draft_take(tenant=tenant_a, draft_id=draft.pk, actor=people["ben"])
    client.force_login(admin_a.user)
    page = client.get(reverse("draft", args=[tenant_a.slug, draft.pk])).content.decode()
    hand = reverse("draft_hand", args=[tenant_a.slug, draft.pk])
    client.post(hand, {**form_fields(page, hand), "to": str(people["dan"].pk)})
    assert Draft.objects.get(pk=draft.pk).assignee == people["dan"]
    page = client.get(reverse("draft", args=[tenant_a.slug, draft.pk])).content.decode()
    release = reverse("draft_release", args=[tenant_a.slug, draft.pk])
    client.post(release, form_fields(page, release))
    assert Draft.objects.get(pk=draft.pk).assignee is None
