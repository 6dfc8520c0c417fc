"""The sandbox caps a webhook's payload as AgentMail does (reference §5.3: "Payloads are capped at
1 MB. When the cap is exceeded, `text` and `html` are omitted and the receiver must `GET` the
message"). It sent a customer's 10 MB mail whole: our receiver refused it (413), the sandbox
retried it until it gave up, and the message reached us only through the backfill, which the
real AgentMail never makes us rely on."""

from __future__ import annotations

from tests.sandbox.test_sdk_fidelity import make_tenant, verified

TEN_MB = "A long complaint. " * 600_000


def test_a_ten_megabyte_mail_is_delivered_without_its_bodies(sandbox, receiver):
    pod, inbox, _, _ = make_tenant(sandbox)
    endpoint = receiver()
    hook = sandbox.sdk().pods.webhooks.create(
        pod.pod_id, url=endpoint.url, event_types=["message.received"]
    )

    sent = sandbox.inbound(
        inbox.inbox_id,
        from_="jane@example.com",
        subject="Everything",
        text=TEN_MB,
        html="<div>" * 10_000 + TEN_MB + "</div>" * 10_000,
    )
    sandbox.wait_for(lambda: endpoint.events(), timeout=15)
    headers, body = endpoint.events()[0]
    event = verified(headers, body, hook.secret)
    whole = sandbox.sdk().inboxes.messages.get(inbox.inbox_id, sent["message_id"])

    assert len(body) <= 1_000_000
    message = event["message"]
    assert {"text", "html", "extracted_text", "extracted_html"} & set(message) == set()
    assert message["preview"] == " ".join(TEN_MB.split())[:200]
    assert message["subject"] == "Everything"
    assert whole.text == TEN_MB


def test_a_small_mail_is_delivered_with_its_bodies(sandbox, receiver):
    pod, inbox, _, _ = make_tenant(sandbox)
    endpoint = receiver()
    hook = sandbox.sdk().pods.webhooks.create(
        pod.pod_id, url=endpoint.url, event_types=["message.received"]
    )

    sandbox.inbound(inbox.inbox_id, from_="jane@example.com", text="Hello", html="<p>Hello</p>")
    sandbox.wait_for(lambda: endpoint.events())
    event = verified(*endpoint.events()[0], hook.secret)

    assert (event["message"]["text"], event["message"]["html"]) == ("Hello", "<p>Hello</p>")
