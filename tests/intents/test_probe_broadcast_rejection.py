"""An outside probe of a broadcast's rejection as the journal keeps it."""

import pytest

from intents.models import IntentEvent
from intents.services.broadcasts import broadcast_reject
from tests.intents.test_broadcasts import create

pytestmark = pytest.mark.django_db(transaction=True)


def test_the_rejection_journal_names_the_content_it_rejected(live):
    """Found by an outside probe: the journal row of a rejection named no content, where the
    creation, every replacement of the list and the approval name their hash, and a draft's
    rejection names its version and hash: which of an agent's lists a reason was written about
    could not be told from the record."""
    b = create(live)

    broadcast_reject(
        tenant=live.tenant,
        broadcast_id=b.pk,
        actor=live.approver,
        reason="Wrong orders",
        content_hash=b.content_hash,
    )

    rejected = IntentEvent.objects.get(broadcast=b, action="broadcast.rejected")
    assert rejected.data == {"content_hash": b.content_hash}
