"""`PATCH /v0/inboxes/{inbox_id}` (and the pod route) in the sandbox, through the official SDK:
the new display name is what later sends carry in their `from`.

Every call goes over real loopback HTTP; nothing is mocked.
"""

import httpx
import pytest
from agentmail import CreateBearerApiKeyRequest, NotFoundError
from agentmail.core.api_error import ApiError

NO_RETRY = {"max_retries": 0}


def code_of(error):
    body = error.body
    return body["code"] if isinstance(body, dict) else body.code


def make_inbox(sandbox, name="acme", username="support", display_name="Acme Support"):
    client = sandbox.sdk()
    pod = client.pods.create(name=name, client_id=f"tenant-{name}")
    inbox = client.pods.inboxes.create(
        pod.pod_id, username=username, client_id=f"inbox-{name}", display_name=display_name
    )
    return pod, inbox


def patch(sandbox, path, body, key=None):
    return httpx.patch(
        f"{sandbox.base_url}/v0/{path}",
        json=body,
        headers={"Authorization": f"Bearer {key or sandbox.org_key}"},
        trust_env=False,
    )


def test_a_renamed_inbox_sends_as_its_new_name(sandbox):
    pod, inbox = make_inbox(sandbox)
    client = sandbox.sdk()
    client.inboxes.messages.send(inbox.inbox_id, to="jane@example.com", text="before")

    updated = client.pods.inboxes.update(
        pod.pod_id, inbox.inbox_id, display_name="Acme Billing", request_options=NO_RETRY
    )
    client.inboxes.messages.send(inbox.inbox_id, to="jane@example.com", text="after")

    sends = sandbox.ledger(inbox_id=inbox.inbox_id)
    assert (updated.inbox_id, updated.display_name) == (inbox.inbox_id, "Acme Billing")
    assert client.inboxes.get(inbox.inbox_id).display_name == "Acme Billing"
    assert sorted((s["text"], s["from"]) for s in sends) == [
        ("after", "Acme Billing <support@agentmail.to>"),
        ("before", "Acme Support <support@agentmail.to>"),
    ]
    assert [(r["method"], r["status"]) for r in sandbox.requests(route="update_inbox")] == [
        ("PATCH", 200)
    ]


def test_the_flat_route_updates_and_an_empty_name_sends_from_the_bare_address(sandbox):
    _, inbox = make_inbox(sandbox)
    client = sandbox.sdk()

    cleared = client.inboxes.update(inbox.inbox_id, display_name="", request_options=NO_RETRY)
    client.inboxes.messages.send(inbox.inbox_id, to="jane@example.com", text="plain")

    assert cleared.display_name is None
    assert [s["from"] for s in sandbox.ledger(inbox_id=inbox.inbox_id)] == ["support@agentmail.to"]


def test_an_update_needs_a_field_a_known_inbox_and_valid_values(sandbox):
    _, inbox = make_inbox(sandbox)
    other_pod, _ = make_inbox(sandbox, "globex", "help")
    path = f"inboxes/{inbox.inbox_id}"

    empty = patch(sandbox, path, {})
    unknown_only = patch(sandbox, path, {"username": "renamed"})
    bad_status = patch(sandbox, path, {"status": "asleep"})
    bad_name = patch(sandbox, path, {"display_name": 7})
    missing = patch(sandbox, "inboxes/nobody@agentmail.to", {"display_name": "X"})
    wrong_pod = patch(sandbox, f"pods/{other_pod.pod_id}/{path}", {"display_name": "X"})

    assert [r.status_code for r in (empty, unknown_only, bad_status, bad_name)] == [400] * 4
    assert {r.json()["code"] for r in (empty, unknown_only, bad_status, bad_name)} == {
        "validation_error"
    }
    assert bad_status.json()["errors"][0]["path"] == ["status"]
    assert (missing.status_code, missing.json()["code"]) == (404, "not_found")
    assert (wrong_pod.status_code, wrong_pod.json()["code"]) == (404, "not_found")
    assert sandbox.sdk().inboxes.get(inbox.inbox_id).display_name == "Acme Support"
    assert [r["status"] for r in sandbox.requests(route="update_inbox")] == [
        400,
        400,
        400,
        400,
        404,
        404,
    ]


def test_metadata_is_merged_a_null_key_removed_and_null_clears_it(sandbox):
    _, inbox = make_inbox(sandbox)
    client = sandbox.sdk()

    first = client.inboxes.update(inbox.inbox_id, metadata={"tier": "gold", "seats": 3})
    merged = client.inboxes.update(inbox.inbox_id, metadata={"seats": None, "vip": True})
    empty = patch(sandbox, f"inboxes/{inbox.inbox_id}", {"metadata": {}})
    cleared = client.inboxes.update(inbox.inbox_id, metadata=None, status="paused")
    resumed = client.inboxes.update(inbox.inbox_id, status="active")

    assert first.metadata == {"tier": "gold", "seats": 3}
    assert merged.metadata == {"tier": "gold", "vip": True}
    assert empty.status_code == 400
    assert (cleared.metadata, cleared.status) == (None, "paused")
    assert resumed.status is None
    assert resumed.display_name == "Acme Support"


def test_scoped_keys_update_only_what_they_may(sandbox):
    pod, inbox = make_inbox(sandbox)
    other_pod, other_inbox = make_inbox(sandbox, "globex", "help")
    org = sandbox.sdk()
    pod_key = org.pods.api_keys.create(pod.pod_id, request=CreateBearerApiKeyRequest(name="pod"))
    unrestricted = org.inboxes.api_keys.create(
        inbox.inbox_id, request=CreateBearerApiKeyRequest(name="inbox")
    )
    send_only = org.inboxes.api_keys.create(
        inbox.inbox_id,
        request=CreateBearerApiKeyRequest(name="send", permissions={"message_send": True}),
    )
    as_pod = sandbox.sdk(pod_key.api_key)
    as_inbox = sandbox.sdk(unrestricted.api_key)

    with pytest.raises(NotFoundError):
        as_pod.inboxes.update(other_inbox.inbox_id, display_name="Hijacked")
    with pytest.raises(NotFoundError):
        as_inbox.inboxes.update(other_inbox.inbox_id, display_name="Hijacked")
    with pytest.raises(ApiError) as pod_route:
        as_inbox.pods.inboxes.update(pod.pod_id, inbox.inbox_id, display_name="Via pod")
    with pytest.raises(ApiError) as no_permission:
        sandbox.sdk(send_only.api_key).inboxes.update(inbox.inbox_id, display_name="Nope")
    by_pod = as_pod.pods.inboxes.update(pod.pod_id, inbox.inbox_id, display_name="Pod named")
    by_inbox = as_inbox.inboxes.update(inbox.inbox_id, display_name="Inbox named")

    assert (pod_route.value.status_code, code_of(pod_route.value)) == (403, "forbidden")
    assert (no_permission.value.status_code, code_of(no_permission.value)) == (
        403,
        "missing_permission",
    )
    assert (by_pod.display_name, by_inbox.display_name) == ("Pod named", "Inbox named")
    assert org.inboxes.get(other_inbox.inbox_id).display_name == "Acme Support"
    assert other_pod.pod_id != pod.pod_id


def test_faults_apply_to_the_update_route(sandbox):
    pod, inbox = make_inbox(sandbox)
    sandbox.fault("update_inbox", "500_before")

    with pytest.raises(ApiError) as failed:
        sandbox.sdk().pods.inboxes.update(
            pod.pod_id, inbox.inbox_id, display_name="Acme Billing", request_options=NO_RETRY
        )
    retried = sandbox.sdk().pods.inboxes.update(
        pod.pod_id, inbox.inbox_id, display_name="Acme Billing", request_options=NO_RETRY
    )

    assert failed.value.status_code == 500
    assert retried.display_name == "Acme Billing"
    assert [(r["status"], r["fault"]) for r in sandbox.requests(route="update_inbox")] == [
        (500, "500_before"),
        (200, None),
    ]
