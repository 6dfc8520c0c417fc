"""Probes of draft attachments from outside: two agents storing the same files at once, and a
revision that only repeats a file."""

from __future__ import annotations

import base64

import pytest
from django.db import transaction
from django.test import Client

from intents.models import AttachmentBlob, Draft, DraftVersion
from review.diff import version_diff
from tests.agent_api.conftest import Api, draft_body
from tests.intents.helpers import blocked_on_a_lock, in_thread


def _file(filename: str, data: bytes) -> dict:
    return {
        "filename": filename,
        "content_type": "text/plain",
        "content": base64.b64encode(data).decode(),
    }


@pytest.mark.django_db(transaction=True)
def test_two_agents_attaching_the_same_files_in_either_order_both_get_their_draft(
    make_token, tenant_a, mailbox_a, mailbox_a2
):
    # Two agents of one tenant, each with its own mailbox, attach the tenant's terms and price
    # list (held already) in opposite orders. Storing a file locks its blob row until commit;
    # taken in the order given, each waited for the other's second file: a deadlock, and one
    # agent's draft failed with a 500.
    terms, prices = _file("terms.txt", b"terms " * 50), _file("prices.txt", b"prices " * 50)
    first, second = make_token(tenant_a), make_token(tenant_a)
    Api(Client()).post(
        "/drafts", draft_body(mailbox_a, attachments=[terms, prices]), token=first, key="k0"
    )
    outcome: list = []

    # Hold both blobs while the two requests line up behind them, one at each file.
    with transaction.atomic():
        list(AttachmentBlob.objects.select_for_update().filter(tenant=tenant_a))
        one = in_thread(
            lambda: Api(Client(raise_request_exception=False)).post(
                "/drafts", draft_body(mailbox_a, attachments=[terms, prices]), token=first, key="k1"
            ),
            outcome,
        )
        other = in_thread(
            lambda: Api(Client(raise_request_exception=False)).post(
                "/drafts",
                draft_body(mailbox_a2, attachments=[prices, terms]),
                token=second,
                key="k2",
            ),
            outcome,
        )
        assert blocked_on_a_lock(count=2), "the two requests never waited on the blobs"
    one.join(30)
    other.join(30)

    assert sorted(response.status_code for response in outcome) == [201, 201]
    assert Draft.objects.filter(tenant=tenant_a).count() == 3
    assert AttachmentBlob.objects.filter(tenant=tenant_a).count() == 2


@pytest.mark.django_db
def test_a_revision_that_adds_a_second_copy_of_a_file_is_a_difference(api, token_a, mailbox_a):
    # The hash counts each file (two copies of terms.txt are not one), so the customer would get
    # it twice; the diff compared sets of files, and the reviewer (or a stale approval's page)
    # read "No difference in content".
    terms = _file("terms.txt", b"terms " * 50)
    created = api.post(
        "/drafts", draft_body(mailbox_a, attachments=[terms]), token=token_a, key="d"
    )
    draft_id = created.json()["id"]
    api.post(
        f"/drafts/{draft_id}/versions",
        {
            "to": ["customer@example.com"],
            "subject": "Re: Where is my order?",
            "text": "It shipped yesterday.",
            "attachments": [terms, terms],
        },
        token=token_a,
    )
    first, second = DraftVersion.objects.filter(draft_id=draft_id).order_by("number")

    diff = version_diff(first, second)

    assert first.content_hash != second.content_hash
    assert [f.filename for f in diff.files_added] == ["terms.txt"]
    assert diff.files_removed == []
    assert diff.changed
