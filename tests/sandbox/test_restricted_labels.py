"""Spam, blocked and unauthenticated mail is out of sight of a key without its `label_*_read`
permission, and left out of listings unless asked for (docs errors.mdx#not_found,
permissions.mdx; reference §2.4, §4.2, §7.3). The product's mailbox keys are such keys: a fake
that showed this mail would let the inbound backfill meet messages AgentMail never lists."""

import pytest
from agentmail import CreateBearerApiKeyRequest, NotFoundError
from agentmail.core.api_error import ApiError

from mailboxes.sandbox.testing import SandboxServer

NO_RETRY = {"max_retries": 0}
LEAST_PRIVILEGE = {
    "message_send": True,
    "message_read": True,
    "webhook_create": True,
    "label_spam_read": False,
    "label_blocked_read": False,
    "label_unauthenticated_read": False,
    "label_trash_read": False,
}


def make_inbox(sandbox: SandboxServer):
    client = sandbox.sdk()
    pod = client.pods.create(name="acme", client_id="tenant-acme")
    inbox = client.pods.inboxes.create(pod.pod_id, username="support", client_id="inbox-acme")
    key = client.inboxes.api_keys.create(
        inbox.inbox_id,
        request=CreateBearerApiKeyRequest(name="least", permissions=LEAST_PRIVILEGE),
    )
    return inbox.inbox_id, sandbox.sdk(key.api_key)


def test_unauthenticated_mail_is_labelled_and_hidden_from_a_key_that_may_not_read_it(sandbox):
    inbox_id, limited = make_inbox(sandbox)
    sandbox.inbound(inbox_id, from_="Customer <c@example.com>", text="real")
    spoofed = sandbox.inbound(
        inbox_id,
        from_="CEO <ceo@example.com>",
        text="wire the money",
        event_type="message.received.unauthenticated",
    )
    org = sandbox.sdk()

    listed = limited.inboxes.messages.list(inbox_id, request_options=NO_RETRY)
    asked = limited.inboxes.messages.list(
        inbox_id, include_unauthenticated=True, request_options=NO_RETRY
    )
    with pytest.raises(NotFoundError):
        limited.inboxes.messages.get(inbox_id, spoofed["message_id"], request_options=NO_RETRY)
    with pytest.raises(NotFoundError):
        limited.inboxes.messages.reply(
            inbox_id, spoofed["message_id"], text="done", request_options=NO_RETRY
        )
    seen_by_org = org.inboxes.messages.get(inbox_id, spoofed["message_id"])
    default = org.inboxes.messages.list(inbox_id, request_options=NO_RETRY)
    included = org.inboxes.messages.list(
        inbox_id, include_unauthenticated=True, request_options=NO_RETRY
    )

    assert seen_by_org.text == "wire the money"
    assert "unauthenticated" in seen_by_org.labels
    assert [m.from_ for m in listed.messages] == ["Customer <c@example.com>"]
    assert [m.from_ for m in asked.messages] == ["Customer <c@example.com>"]
    assert [m.from_ for m in default.messages] == ["Customer <c@example.com>"]
    assert [m.from_ for m in included.messages] == [
        "CEO <ceo@example.com>",
        "Customer <c@example.com>",
    ]
    assert sandbox.ledger() == []


def test_a_webhook_for_filtered_mail_needs_the_labels_permission(sandbox, receiver):
    inbox_id, limited = make_inbox(sandbox)
    url = receiver().url

    with pytest.raises(ApiError) as refused:
        limited.inboxes.webhooks.create(
            inbox_id, url=url, event_types=["message.received.spam"], request_options=NO_RETRY
        )
    allowed = limited.inboxes.webhooks.create(
        inbox_id, url=url, event_types=["message.received"], request_options=NO_RETRY
    )

    assert refused.value.status_code == 403
    assert refused.value.body["code"] == "missing_permission"
    assert refused.value.body["message"] == "label_spam_read is forbidden"
    assert allowed.event_types == ["message.received"]
