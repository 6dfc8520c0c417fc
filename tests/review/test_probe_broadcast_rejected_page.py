"""An outside probe of a rejected broadcast's page, as a colleague of the reviewer reads it."""

import pytest

from intents.services.broadcasts import broadcast_create, broadcast_reject
from tests.factories import make_local_mailbox

pytestmark = pytest.mark.django_db


def test_a_rejected_broadcasts_page_says_who_rejected_it_and_why(signed_in, member_of, tenant_a):
    """Found by an outside probe: the page of a rejected broadcast said 'Rejected' and nothing
    more, while the reason (required to reject) was stored: a colleague could not tell why, or
    who to ask, where a rejected draft's page says both."""
    broadcast = broadcast_create(
        tenant=tenant_a,
        mailbox=make_local_mailbox(tenant_a),
        subject="Delay {{ n }}",
        text="Hello {{ n }}",
        recipients=[{"address": f"p{i}@example.com", "variables": {"n": i}} for i in range(2)],
    )
    reviewer = member_of(tenant_a, "approver").user
    broadcast_reject(
        tenant=tenant_a,
        broadcast_id=broadcast.pk,
        actor=reviewer,
        reason="<b>Wrong</b> orders for row 2",
        content_hash=broadcast.content_hash,
    )
    client = signed_in(member_of(tenant_a, "viewer").user)

    page = client.get(f"/t/{tenant_a.slug}/broadcasts/{broadcast.pk}/").content.decode()

    assert f"Rejected by {reviewer.display_name}:" in page
    assert "&lt;b&gt;Wrong&lt;/b&gt; orders for row 2" in page
