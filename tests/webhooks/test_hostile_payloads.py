"""Signed deliveries whose content is hostile or broken: inbound mail is outsiders' text, so the
receiver stores it safely and answers 2xx (or refuses it whole with a 400), never a 5xx."""

from __future__ import annotations

import json

import pytest

from tests.webhooks.conftest import new_svix_id, received_payload
from webhooks.models import InboundMessage, WebhookEvent


@pytest.fixture
def hook(tenant_a, hook_for):
    return hook_for(tenant_a)


@pytest.fixture
def mailbox(tenant_a, mailbox_row):
    return mailbox_row(tenant_a)


def _signed_post(client, hook, body: str):
    return hook.post_raw(client, body.encode(), hook.headers(body, svix_id=new_svix_id()))


@pytest.mark.parametrize("depth", [100_000, 1_000, 40])
def test_a_deeply_nested_signed_body_is_400_and_stores_nothing(client, hook, mailbox, depth):
    event = received_payload(mailbox, thread_id="thr_1")
    nested = "[" * depth + "1" + "]" * depth
    body = json.dumps(event)[:-1] + f', "extra": {nested}}}'

    response = _signed_post(client, hook, body)

    assert response.status_code == 400
    assert response["Content-Type"] == "application/problem+json"
    assert response.json()["detail"] == "body_too_deep"
    assert WebhookEvent.objects.count() == 0
    assert InboundMessage.objects.count() == 0


def test_a_real_shaped_body_is_well_within_the_depth_limit(client, hook, mailbox):
    event = received_payload(mailbox, thread_id="thr_1")
    event["message"]["headers"] = {"x": [{"y": [{"z": ["deep"]}]}]}

    assert _signed_post(client, hook, json.dumps(event)).status_code == 200
