"""The security battery (issue 6, reference §2.6 W1/W4): each forged, stale, malformed or
misattributed delivery is refused or ignored, stores nothing that changes state, never a 5xx."""

from __future__ import annotations

import json
import uuid
from datetime import UTC, datetime, timedelta

import pytest
from django.urls import reverse

from intents.models import IntentEvent, Suppression
from tests.webhooks.conftest import (
    add_secret,
    delivery_payload,
    new_secret,
    new_svix_id,
    received_payload,
)
from webhooks.models import InboundMessage, RecipientDelivery, WebhookEndpoint, WebhookEvent


@pytest.fixture
def scene(tenant_a, tenant_b, hook_for, mailbox_row, intent_row):
    """Tenant A's endpoint and an accepted intent; a bounce payload that, if accepted, would
    change delivery state and add a suppression."""
    hook = hook_for(tenant_a)
    mailbox = mailbox_row(tenant_a)
    intent = intent_row(mailbox, to=["jane@customer.test"])
    payload = delivery_payload("bounced", intent)
    body = json.dumps(payload, separators=(",", ":"))
    other = hook_for(tenant_b)
    other_mailbox = mailbox_row(tenant_b, "help")
    other_intent = intent_row(other_mailbox, to=["bob@customer.test"])
    return {
        "hook": hook,
        "intent": intent,
        "body": body,
        "other": other,
        "other_intent": other_intent,
    }


def nothing_changed():
    return {
        "events": WebhookEvent.objects.count(),
        "deliveries": RecipientDelivery.objects.count(),
        "suppressions": Suppression.objects.count(),
        "journal": IntentEvent.objects.count(),
        "inbound": InboundMessage.objects.count(),
    } == {"events": 0, "deliveries": 0, "suppressions": 0, "journal": 0, "inbound": 0}


def _signed(scene, **kw):
    svix_id = new_svix_id()
    return scene["hook"].headers(scene["body"], svix_id=svix_id, **kw)


def no_signature(scene):
    headers = _signed(scene)
    del headers["svix-signature"]
    return scene["body"].encode(), headers


def no_headers(scene):
    return scene["body"].encode(), {}


def wrong_signature(scene):
    return scene["body"].encode(), _signed(scene, secret=new_secret())


def rotated_out_secret(scene):
    old = new_secret()
    add_secret(scene["hook"].endpoint, old, retired=True)
    return scene["body"].encode(), _signed(scene, secret=old)


def six_minutes_old(scene):
    return scene["body"].encode(), _signed(scene, at=datetime.now(UTC) - timedelta(minutes=6))


def six_minutes_ahead(scene):
    return scene["body"].encode(), _signed(scene, at=datetime.now(UTC) + timedelta(minutes=6))


def nan_timestamp(scene):
    headers = _signed(scene)
    headers["svix-timestamp"] = "nan"
    return scene["body"].encode(), headers


def signature_without_comma(scene):
    headers = _signed(scene)
    headers["svix-signature"] = "garbage"
    return scene["body"].encode(), headers


def signature_with_two_commas(scene):
    headers = _signed(scene)
    headers["svix-signature"] = headers["svix-signature"] + ",extra"
    return scene["body"].encode(), headers


def signature_not_base64(scene):
    headers = _signed(scene)
    headers["svix-signature"] = "v1,@@@ not base64 @@@"
    return scene["body"].encode(), headers


def only_other_version(scene):
    headers = _signed(scene)
    headers["svix-signature"] = headers["svix-signature"].replace("v1,", "v1a,")
    return scene["body"].encode(), headers


def non_utf8_body(scene):
    body = scene["body"].encode().replace(b"Permanent", b"Perm\xff\xfenent")
    return body, _signed(scene)


def one_byte_changed(scene):
    body = scene["body"].replace("5.1.1", "5.1.2").encode()
    return body, _signed(scene)


def reserialized_json(scene):
    body = json.dumps(json.loads(scene["body"]), indent=1).encode()
    return body, _signed(scene)


def svix_id_swapped(scene):
    headers = _signed(scene)
    headers["svix-id"] = new_svix_id()
    return scene["body"].encode(), headers


@pytest.mark.parametrize(
    "forge",
    [
        no_signature,
        no_headers,
        wrong_signature,
        rotated_out_secret,
        six_minutes_old,
        six_minutes_ahead,
        nan_timestamp,
        signature_without_comma,
        signature_with_two_commas,
        signature_not_base64,
        only_other_version,
        non_utf8_body,
        one_byte_changed,
        reserialized_json,
        svix_id_swapped,
    ],
)
def test_unverifiable_delivery_is_refused_with_400_and_stores_nothing(client, scene, forge):
    body, headers = forge(scene)

    response = scene["hook"].post_raw(client, body, headers)

    assert response.status_code == 400
    assert response["Content-Type"] == "application/problem+json"
    assert nothing_changed()


def test_correctly_signed_delivery_is_accepted_and_changes_state(client, scene):
    headers = _signed(scene)

    response = scene["hook"].post_raw(client, scene["body"].encode(), headers)

    assert response.status_code == 200
    assert WebhookEvent.objects.get().state == WebhookEvent.State.APPLIED
    assert RecipientDelivery.objects.get(intent=scene["intent"]).state == "bounced"
    assert Suppression.objects.filter(tenant=scene["intent"].tenant).count() == 1


def test_signature_list_with_a_bad_and_a_good_entry_is_accepted(client, scene):
    headers = _signed(scene)
    headers["svix-signature"] = (
        "v1,AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA= " + headers["svix-signature"]
    )

    response = scene["hook"].post_raw(client, scene["body"].encode(), headers)

    assert response.status_code == 200
    assert WebhookEvent.objects.count() == 1


def test_during_rotation_the_previous_secret_still_verifies(client, scene):
    previous = scene["hook"].secret
    add_secret(scene["hook"].endpoint, new_secret())

    response = scene["hook"].post_raw(
        client, scene["body"].encode(), _signed(scene, secret=previous)
    )

    assert response.status_code == 200
    assert WebhookEvent.objects.count() == 1


def test_webhook_prefixed_standard_headers_are_accepted(client, scene):
    headers = {k.replace("svix-", "webhook-"): v for k, v in _signed(scene).items()}

    response = scene["hook"].post_raw(client, scene["body"].encode(), headers)

    assert response.status_code == 200
    assert WebhookEvent.objects.count() == 1


def test_another_tenants_endpoint_id_does_not_verify(client, scene):
    """A's correctly signed delivery posted to B's endpoint: B's secret does not match it."""
    headers = _signed(scene)

    response = scene["hook"].post_raw(
        client, scene["body"].encode(), headers, url=scene["other"].url
    )

    assert response.status_code == 400
    assert nothing_changed()


def test_another_tenants_inbox_in_a_signed_payload_is_stored_rejected_and_changes_nothing(
    client, scene
):
    """B's endpoint, correctly signed with B's secret, names A's inbox and A's message."""
    response = scene["other"].post(client, json.loads(scene["body"]))

    event = WebhookEvent.objects.get()
    assert response.status_code == 200
    assert (event.tenant_id, event.state) == (scene["other"].tenant.pk, WebhookEvent.State.REJECTED)
    assert RecipientDelivery.objects.count() == 0
    assert Suppression.objects.count() == 0
    assert IntentEvent.objects.count() == 0


def test_another_tenants_inbox_in_a_received_event_records_nothing(client, scene, mailbox_row):
    payload = received_payload(scene["intent"].mailbox, thread_id="thr_a")

    response = scene["other"].post(client, payload)

    assert response.status_code == 200
    assert WebhookEvent.objects.get().state == WebhookEvent.State.REJECTED
    assert InboundMessage.objects.count() == 0


def test_unknown_endpoint_is_404(client, scene):
    url = reverse("webhooks_agentmail", kwargs={"endpoint_id": uuid.uuid4()})

    response = scene["hook"].post_raw(client, scene["body"].encode(), _signed(scene), url=url)

    assert response.status_code == 404
    assert nothing_changed()


def test_disabled_endpoint_is_404(client, scene):
    WebhookEndpoint.objects.filter(pk=scene["hook"].endpoint.pk).update(
        status=WebhookEndpoint.Status.DISABLED
    )

    response = scene["hook"].post_raw(client, scene["body"].encode(), _signed(scene))

    assert response.status_code == 404
    assert nothing_changed()


def test_malformed_endpoint_id_is_404(client, scene):
    response = client.post(
        "/webhooks/agentmail/not-a-uuid/", data=b"{}", content_type="application/json"
    )

    assert response.status_code == 404


def test_get_is_405(client, scene):
    response = client.get(scene["hook"].url)

    assert response.status_code == 405


def test_oversized_body_is_413_and_stores_nothing(client, scene):
    payload = json.loads(scene["body"])
    payload["padding"] = "x" * (1024 * 1024)
    body = json.dumps(payload)

    response = scene["hook"].post_raw(
        client, body.encode(), scene["hook"].headers(body, svix_id=new_svix_id())
    )

    assert response.status_code == 413
    assert nothing_changed()


@pytest.mark.parametrize("body", ["not json", "[1, 2, 3]", '"event"'])
def test_signed_body_that_is_not_a_json_object_is_400(client, scene, body):
    response = scene["hook"].post_raw(
        client, body.encode(), scene["hook"].headers(body, svix_id=new_svix_id())
    )

    assert response.status_code == 400
    assert nothing_changed()


def test_replayed_svix_id_answers_200_and_changes_nothing(client, scene):
    svix_id = new_svix_id()
    first = scene["hook"].post_raw(
        client, scene["body"].encode(), scene["hook"].headers(scene["body"], svix_id=svix_id)
    )
    before = list(RecipientDelivery.objects.values_list("state", "updated_at", "last_event_id"))

    again = scene["hook"].post_raw(
        client, scene["body"].encode(), scene["hook"].headers(scene["body"], svix_id=svix_id)
    )

    assert (first.status_code, again.status_code) == (200, 200)
    assert again.json()["duplicate"] is True
    assert WebhookEvent.objects.count() == 1
    assert IntentEvent.objects.count() == 1
    assert (
        list(RecipientDelivery.objects.values_list("state", "updated_at", "last_event_id"))
        == before
    )


def test_csrf_is_not_required(scene):
    from django.test import Client

    strict = Client(enforce_csrf_checks=True)

    response = scene["hook"].post_raw(strict, scene["body"].encode(), _signed(scene))

    assert response.status_code == 200
