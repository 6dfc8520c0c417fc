"""`DELETE /v0/inboxes/{inbox_id}` (and the pod route) and `DELETE /v0/pods/{pod_id}` in the
sandbox, through the official SDK: what goes with a deleted inbox or pod, the 409 of a pod that
still holds inboxes, and a client_id that keeps answering with the object it made.

Every call goes over real loopback HTTP; nothing is mocked.
"""

import pytest
from agentmail import CreateBearerApiKeyRequest, NotFoundError
from agentmail.core.api_error import ApiError

NO_RETRY = {"max_retries": 0}


def code_of(error):
    body = error.body
    return body["code"] if isinstance(body, dict) else body.code


def make_inbox(client, name="acme", username="support"):
    pod = client.pods.create(name=name, client_id=f"tenant-{name}")
    inbox = client.pods.inboxes.create(pod.pod_id, username=username, client_id=f"inbox-{name}")
    return pod, inbox


def test_a_deleted_inbox_is_gone_with_its_keys_and_messages(sandbox):
    client = sandbox.sdk()
    pod, inbox = make_inbox(client)
    key = client.inboxes.api_keys.create(
        inbox.inbox_id, request=CreateBearerApiKeyRequest(name="k"), request_options=NO_RETRY
    )
    client.inboxes.messages.send(inbox.inbox_id, to="jane@example.com", text="before")

    client.pods.inboxes.delete(pod.pod_id, inbox.inbox_id, request_options=NO_RETRY)

    with pytest.raises(NotFoundError):
        client.inboxes.get(inbox.inbox_id, request_options=NO_RETRY)
    with pytest.raises(ApiError) as refused:
        sandbox.sdk(key.api_key).inboxes.messages.send(
            inbox.inbox_id, to="jane@example.com", text="after", request_options=NO_RETRY
        )
    assert (refused.value.status_code, code_of(refused.value)) == (401, "unknown_api_key")
    assert client.pods.inboxes.list(pod.pod_id).inboxes == []
    # The ledger is the record of what went out: the send before the delete stays in it.
    assert [s["text"] for s in sandbox.ledger(inbox_id=inbox.inbox_id)] == ["before"]


def test_a_deleted_inboxs_client_id_answers_with_the_gone_inbox_and_a_new_one_makes_it_again(
    sandbox,
):
    client = sandbox.sdk()
    pod, inbox = make_inbox(client)
    client.inboxes.delete(inbox.inbox_id, request_options=NO_RETRY)

    repeated = client.pods.inboxes.create(pod.pod_id, username="support", client_id="inbox-acme")
    with pytest.raises(NotFoundError):
        client.inboxes.get(repeated.inbox_id, request_options=NO_RETRY)
    again = client.pods.inboxes.create(pod.pod_id, username="support", client_id="inbox-acme-2")

    assert (repeated.inbox_id, repeated.created_at) == (inbox.inbox_id, inbox.created_at)
    assert again.inbox_id == inbox.inbox_id
    assert client.inboxes.get(again.inbox_id).client_id == "inbox-acme-2"


def test_a_pod_with_inboxes_is_not_deleted(sandbox):
    client = sandbox.sdk()
    pod, inbox = make_inbox(client)

    with pytest.raises(ApiError) as refused:
        client.pods.delete(pod.pod_id, request_options=NO_RETRY)

    assert (refused.value.status_code, code_of(refused.value)) == (409, "cannot_delete")
    assert client.pods.get(pod.pod_id).pod_id == pod.pod_id
    assert client.inboxes.get(inbox.inbox_id).inbox_id == inbox.inbox_id


def test_a_deleted_pod_is_gone_with_its_webhooks_and_its_client_id_answers_with_it(sandbox):
    client = sandbox.sdk()
    pod, inbox = make_inbox(client)
    hook = client.pods.webhooks.create(
        pod.pod_id, url="http://127.0.0.1:9/hooks", event_types=["message.sent"]
    )
    client.inboxes.delete(inbox.inbox_id, request_options=NO_RETRY)

    client.pods.delete(pod.pod_id, request_options=NO_RETRY)

    with pytest.raises(NotFoundError):
        client.pods.get(pod.pod_id, request_options=NO_RETRY)
    assert hook.webhook_id not in [w.webhook_id for w in client.webhooks.list().webhooks]
    assert client.pods.create(name="acme", client_id="tenant-acme").pod_id == pod.pod_id
    assert client.pods.create(name="acme", client_id="tenant-acme-2").pod_id != pod.pod_id


def test_the_default_pod_is_not_deleted(sandbox):
    client = sandbox.sdk()

    with pytest.raises(ApiError) as refused:
        client.pods.delete(sandbox.health()["default_pod_id"], request_options=NO_RETRY)

    assert (refused.value.status_code, code_of(refused.value)) == (409, "cannot_delete")
