"""A broadcast's requests cost as many queries for 500 recipients as for 50: the agent API's
create and replace, the review page, its recipients' download and the approval. A replacement
deleted the old rows through Django's collector (the recipients are PROTECTed by their sends),
which loaded every row and deleted them a hundred at a time: 100 DELETEs for 10,000 recipients,
inside the broadcast's lock."""

from __future__ import annotations

import json

import pytest
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from intents.models import Broadcast, BroadcastRecipient
from tests.factories import make_local_mailbox

pytestmark = pytest.mark.django_db


def rows(n: int, start: int = 0) -> list[dict]:
    return [
        {"address": f"customer{i}@example.com", "variables": {"name": f"N{i}", "order": str(i)}}
        for i in range(start, start + n)
    ]


def queries_of(request) -> tuple[int, object]:
    with CaptureQueriesContext(connection) as captured:
        response = request()
    return len(captured), response


def costs(n: int, *, api: Client, mailbox, page: Client) -> dict[str, int]:
    """Each request's query count for a broadcast of ``n`` recipients."""
    body = {
        "mailbox": mailbox.address,
        "subject": "Order {{ order }}",
        "text": "Hello {{ name }}",
        "recipients": rows(n),
    }
    create, created = queries_of(
        lambda: api.post(
            "/api/v1/broadcasts",
            data=json.dumps(body),
            content_type="application/json",
            headers={"Idempotency-Key": f"size-{n}"},
        )
    )
    assert created.status_code == 201, created.content
    broadcast_id = created.json()["id"]
    replace, replaced = queries_of(
        lambda: api.generic(
            "PUT",
            f"/api/v1/broadcasts/{broadcast_id}/recipients",
            data=json.dumps({"recipients": rows(n, start=1)}),
            content_type="application/json",
        )
    )
    assert replaced.status_code == 200, replaced.content
    broadcast = Broadcast.objects.get(pk=broadcast_id)
    assert BroadcastRecipient.objects.filter(broadcast=broadcast).count() == n
    slug = broadcast.tenant.slug
    detail, shown = queries_of(lambda: page.get(reverse("broadcast", args=[slug, broadcast_id])))
    assert shown.status_code == 200
    csv_url = reverse("broadcast_recipients_csv", args=[slug, broadcast_id])
    download, listed = queries_of(
        lambda: b"".join(page.get(csv_url, {"hash": broadcast.content_hash}).streaming_content)
    )
    assert listed.count(b"\n") == n + 1
    approve, approved = queries_of(
        lambda: page.post(
            reverse("broadcast_approve", args=[slug, broadcast_id]),
            {"content_hash": broadcast.content_hash},
        )
    )
    assert approved.status_code == 302
    assert Broadcast.objects.get(pk=broadcast_id).state == Broadcast.State.APPROVED
    return {
        "create": create,
        "replace": replace,
        "page": detail,
        "download": download,
        "approve": approve,
    }


def test_a_broadcasts_requests_do_not_grow_with_its_recipients(
    tenant_a, member_of, signed_in, make_token
):
    mailbox = make_local_mailbox(tenant_a)
    token = make_token(tenant_a)
    page = signed_in(member_of(tenant_a, "approver").user)
    api = Client(headers={"Authorization": f"Bearer {token}"})
    # The first request of a token records its use (once a minute); the first page, the session.
    assert api.get("/api/v1/broadcasts").status_code == 200
    assert page.get(reverse("broadcasts", args=[tenant_a.slug])).status_code == 200
    at_50 = costs(50, api=api, mailbox=mailbox, page=page)
    at_500 = costs(500, api=api, mailbox=mailbox, page=page)

    assert at_500 == at_50
