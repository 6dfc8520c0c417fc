"""Outside probe: one customer, or a spammer, puts two thousand messages from as many domains into
a thread (its headers decide the thread). The draft page, the queue row and the refusal of an
approval from a list each named every domain: some 30 KB of text in one warning sentence (and in
the queue row's title, once per row), which no reviewer reads to its end. They name the first
few and how many more, and still say that the thread holds several organisations."""

from __future__ import annotations

import pytest
from django.urls import reverse
from django.utils import timezone

from intents import errors
from intents import services as intent_services
from webhooks.models import InboundMessage

pytestmark = pytest.mark.django_db

DOMAINS = 2000


@pytest.fixture
def crowded_draft(tenant_a, mailbox_a, make_draft):
    now = timezone.now()
    InboundMessage.objects.bulk_create(
        InboundMessage(
            tenant=tenant_a,
            mailbox=mailbox_a,
            thread_id="thr-crowd",
            message_id=f"<m{n}@crowd.test>",
            sender=f"Customer {n} <c{n}@domain-{n:04d}.test>",
            subject="Refund",
            received_at=now - timezone.timedelta(minutes=DOMAINS - n),
        )
        for n in range(DOMAINS)
    )
    return make_draft(
        mailbox_a,
        in_reply_to="<m0@crowd.test>",
        thread_id="thr-crowd",
        to=["c0@domain-0000.test"],
        subject="Re: Refund",
    )


def test_the_draft_page_names_a_few_of_the_threads_organisations_and_counts_the_rest(
    client, tenant_a, admin_a, crowded_draft
):
    client.force_login(admin_a.user, backend="django.contrib.auth.backends.ModelBackend")

    page = client.get(reverse("draft", args=[tenant_a.slug, crowded_draft.pk])).content.decode()

    start = page.index('data-thread-warning="several_organisations"')
    warning = page[start : page.index("</p>", start)]
    assert len(warning) < 1000
    assert "domain-0000.test" in warning
    assert "domain-1999.test" not in warning
    assert "1,995 more" in warning or "1995 more" in warning


def test_the_queue_row_names_a_few_of_the_threads_organisations(
    client, tenant_a, admin_a, crowded_draft
):
    client.force_login(admin_a.user, backend="django.contrib.auth.backends.ModelBackend")

    queue = client.get(reverse("tenant_home", args=[tenant_a.slug])).content.decode()

    start = queue.index("data-thread-domains")
    badge = queue[start : queue.index("</span>", start)]
    assert len(badge) < 1000
    assert "domain-0000.test" in badge


def test_an_approval_from_a_list_is_refused_in_a_sentence_of_a_few_organisations(
    tenant_a, admin_a, crowded_draft
):
    version = crowded_draft.versions.get()

    with pytest.raises(errors.ThreadOfSeveralOrganisations) as refused:
        intent_services.draft_approve(
            tenant=tenant_a,
            draft_id=crowded_draft.pk,
            version=1,
            content_hash=version.content_hash,
            actor=admin_a.user,
            unseen=True,
        )

    said = str(refused.value.message)
    assert len(said) < 1000
    assert "domain-0000.test" in said
