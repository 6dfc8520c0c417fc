"""The draft page's sender line names what the message will carry: the display name AgentMail
holds for the inbox (``Mailbox.provider_display_name``) beside its address."""

from __future__ import annotations

import re

import pytest
from django.urls import reverse

from tests.factories import make_local_mailbox

pytestmark = pytest.mark.django_db


def sender_line(html: str) -> str:
    return re.search(r"<span data-sender>(.*?)</span></span>", html, re.S).group(1)


def test_the_sender_line_shows_the_name_agentmail_sends_as_beside_the_address(
    tenant_a, admin_a, signed_in, make_draft
):
    # Renamed here, not yet at AgentMail: the message still goes out as "Acme Support".
    mailbox = make_local_mailbox(
        tenant_a, display_name="Acme Billing", provider_display_name="Acme Support"
    )
    draft = make_draft(mailbox)

    page = signed_in(admin_a.user).get(reverse("draft", args=[tenant_a.slug, draft.pk]))
    line = sender_line(page.content.decode())

    assert page.status_code == 200
    assert "<bdi>Acme Support</bdi>" in line
    assert f'<span class="mono">{mailbox.address}' in line
    assert "Acme Billing" not in line


def test_a_mailbox_without_a_name_shows_only_its_address(tenant_a, admin_a, signed_in, make_draft):
    mailbox = make_local_mailbox(tenant_a)
    draft = make_draft(mailbox)

    page = signed_in(admin_a.user).get(reverse("draft", args=[tenant_a.slug, draft.pk]))

    assert "<bdi>" not in sender_line(page.content.decode())
