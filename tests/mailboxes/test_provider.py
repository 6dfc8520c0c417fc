"""The adapter against the sandbox over real HTTP: every classification branch, counted in the
sandbox ledger (what AgentMail really accepted)."""

import uuid

import pytest
from django.utils import timezone

from mailboxes import provider
from mailboxes.provider import Outcome, SendRequest

pytestmark = pytest.mark.django_db


@pytest.fixture
def mailbox(tenant_a, mailbox_factory):
    return mailbox_factory(tenant_a)


def request_for(mailbox, key=None, **overrides):
    fields = {
        "inbox_id": mailbox.inbox_id,
        "to": ["customer@example.com"],
        "cc": [],
        "bcc": [],
        "subject": "Your refund",
        "text": "It is on its way.",
        "html": "",
        "labels": ["cs-intent-test"],
        "idempotency_key": key or f"k-{uuid.uuid4().hex}",
    }
    fields.update(overrides)
    return SendRequest(**fields)


def send(mailbox, request):
    return provider.send_message(api_key=mailbox.api_key(), request=request)


def test_accepted_returns_message_and_thread_ids(mailbox, sandbox):
    request = request_for(mailbox)
    result = send(mailbox, request)
    assert result.outcome == Outcome.ACCEPTED
    assert result.message_id.startswith("<") and result.thread_id
    assert [s["message_id"] for s in sandbox.ledger(idempotency_key=request.idempotency_key)] == [
        result.message_id
    ]


def test_timeout_after_acceptance_then_replay_returns_the_original(mailbox, sandbox, settings):
    settings.AGENTMAIL_READ_TIMEOUT = 0.5
    sandbox.fault("send", "timeout_after_accept", delay=2)
    request = request_for(mailbox)
    lost = send(mailbox, request)
    replay = send(mailbox, request)
    ledger = sandbox.ledger(idempotency_key=request.idempotency_key)
    assert lost.outcome == Outcome.UNCERTAIN
    assert replay.outcome == Outcome.ACCEPTED
    assert [s["message_id"] for s in ledger] == [replay.message_id]


def test_dropped_after_processing_is_uncertain_and_replay_sends_nothing_new(mailbox, sandbox):
    sandbox.fault("send", "drop_after")
    request = request_for(mailbox)
    assert send(mailbox, request).outcome == Outcome.UNCERTAIN
    assert send(mailbox, request).outcome == Outcome.ACCEPTED
    assert len(sandbox.ledger(idempotency_key=request.idempotency_key)) == 1


def test_dropped_before_processing_then_retry_performs_the_first_send(mailbox, sandbox):
    sandbox.fault("send", "drop_before")
    request = request_for(mailbox)
    assert send(mailbox, request).outcome == Outcome.UNCERTAIN
    assert sandbox.ledger(idempotency_key=request.idempotency_key) == []
    assert send(mailbox, request).outcome == Outcome.ACCEPTED
    assert len(sandbox.ledger(idempotency_key=request.idempotency_key)) == 1


def test_429_is_retry_later_with_retry_after(mailbox, sandbox):
    sandbox.fault("send", "429", retry_after=7)
    request = request_for(mailbox)
    result = send(mailbox, request)
    assert result.outcome == Outcome.RETRY_LATER
    assert result.retry_after == 7
    assert result.http_status == 429
    assert sandbox.ledger(idempotency_key=request.idempotency_key) == []


def test_a_503_with_retry_after_is_uncertain_and_carries_the_wait(mailbox, sandbox):
    """It was ignored: the replay went on its own backoff, spending attempts on a service that
    had said when it would be back."""
    sandbox.fault("send", "503_before", retry_after=30)
    request = request_for(mailbox)
    result = send(mailbox, request)
    assert (result.outcome, result.http_status, result.retry_after) == (Outcome.UNCERTAIN, 503, 30)
    assert sandbox.ledger(idempotency_key=request.idempotency_key) == []


@pytest.mark.parametrize("mode", ["500_before", "503_before", "502_html"])
def test_5xx_before_processing_is_uncertain_and_nothing_was_sent(mailbox, sandbox, mode):
    sandbox.fault("send", mode)
    request = request_for(mailbox)
    result = send(mailbox, request)
    assert result.outcome == Outcome.UNCERTAIN
    assert result.http_status >= 500
    assert sandbox.ledger(idempotency_key=request.idempotency_key) == []


def test_5xx_after_processing_is_uncertain_and_replay_finds_the_one_send(mailbox, sandbox):
    sandbox.fault("send", "500_after")
    request = request_for(mailbox)
    assert send(mailbox, request).outcome == Outcome.UNCERTAIN
    replay = send(mailbox, request)
    assert replay.outcome == Outcome.ACCEPTED
    assert len(sandbox.ledger(idempotency_key=request.idempotency_key)) == 1


def test_409_in_progress_is_uncertain(mailbox, sandbox):
    sandbox.fault("send", "409_in_progress")
    result = send(mailbox, request_for(mailbox))
    assert result.outcome == Outcome.UNCERTAIN
    assert result.http_status == 409


def test_same_key_different_request_is_permanent(mailbox, sandbox):
    key = f"k-{uuid.uuid4().hex}"
    assert send(mailbox, request_for(mailbox, key)).outcome == Outcome.ACCEPTED
    conflict = send(mailbox, request_for(mailbox, key, subject="Something else"))
    assert conflict.outcome == Outcome.PERMANENT
    assert conflict.http_status == 409
    assert len(sandbox.ledger(idempotency_key=key)) == 1


def test_no_recipients_is_permanent_422(mailbox, sandbox):
    result = send(mailbox, request_for(mailbox, to=[]))
    assert result.outcome == Outcome.PERMANENT
    assert result.http_status == 422
    assert result.error_code == "unprocessable"


def test_gateway_403_is_permanent(mailbox, sandbox):
    sandbox.fault("send", "gateway_403")
    result = send(mailbox, request_for(mailbox))
    assert result.outcome == Outcome.PERMANENT
    assert result.http_status == 403
    assert result.suppress_recipients is False


def test_unknown_key_is_permanent_401(mailbox, sandbox):
    result = provider.send_message(api_key="am_not_a_key", request=request_for(mailbox))
    assert result.outcome == Outcome.PERMANENT
    assert result.http_status == 401


def test_connection_refused_is_retry_later(mailbox, settings):
    settings.AGENTMAIL_BASE_URL = "http://127.0.0.1:9"
    result = send(mailbox, request_for(mailbox))
    assert result.outcome == Outcome.RETRY_LATER
    assert result.error_code == "ConnectError"


def test_malformed_2xx_is_uncertain(mailbox, sandbox):
    sandbox.fault("send", "malformed_2xx")
    request = request_for(mailbox)
    result = send(mailbox, request)
    assert result.outcome == Outcome.UNCERTAIN
    assert result.error_code == "malformed_response"


def test_a_2xx_that_is_not_json_is_uncertain(mailbox, sandbox):
    sandbox.fault("send", "html_2xx_after")
    result = send(mailbox, request_for(mailbox))
    assert result.outcome == Outcome.UNCERTAIN
    assert result.http_status == 200


def test_reply_with_awkward_message_id_reaches_the_right_message(mailbox, sandbox):
    inbound = sandbox.inbound(
        mailbox.inbox_id,
        from_="customer@example.com",
        subject="Help",
        text="Hi",
        message_id="<odd/id?with#chars@mail.example.com>",
    )
    request = request_for(mailbox, reply_to_message_id=inbound["message_id"])
    result = send(mailbox, request)
    assert result.outcome == Outcome.ACCEPTED
    assert result.thread_id == inbound["thread_id"]


def test_find_by_label(mailbox, sandbox):
    request = request_for(mailbox, labels=["cs-intent-lookup-1"])
    sent = send(mailbox, request)
    found = provider.find_messages_by_label(
        api_key=mailbox.api_key(), inbox_id=mailbox.inbox_id, label="cs-intent-lookup-1"
    )
    missing = provider.find_messages_by_label(
        api_key=mailbox.api_key(), inbox_id=mailbox.inbox_id, label="cs-intent-none"
    )
    assert found.ok and found.message_ids == [sent.message_id]
    assert missing.ok and missing.message_ids == []


@pytest.fixture
def labels_query(sandbox):
    yield lambda mode: sandbox.config(labels_query=mode)
    sandbox.config(labels_query="both")


@pytest.mark.parametrize(
    ("mode", "method"),
    [("both", "label_filter"), ("repeated", "inbox_scan"), ("ignored", "label_filter")],
)
def test_find_by_label_whichever_way_the_provider_reads_the_filter(
    mailbox, labels_query, mode, method
):
    since = timezone.now()
    wanted = send(mailbox, request_for(mailbox, labels=["cs-intent-41"]))
    send(mailbox, request_for(mailbox, labels=["cs-intent-410"]))
    send(mailbox, request_for(mailbox, labels=["cs-intent-4"]))
    labels_query(mode)

    found = provider.find_messages_by_label(
        api_key=mailbox.api_key(), inbox_id=mailbox.inbox_id, label="cs-intent-41", sent_after=since
    )

    assert (found.ok, found.message_ids, found.method) == (True, [wanted.message_id], method)


def test_scan_stops_at_its_time_budget_and_says_it_is_incomplete(
    mailbox, sandbox, labels_query, settings
):
    settings.AGENTMAIL_LOOKUP_PAGE_SIZE = 1
    settings.AGENTMAIL_LOOKUP_SCAN_SECONDS = 0
    since = timezone.now()
    for _ in range(3):
        send(mailbox, request_for(mailbox, labels=["cs-intent-other"]))
    labels_query("repeated")

    found = provider.find_messages_by_label(
        api_key=mailbox.api_key(), inbox_id=mailbox.inbox_id, label="cs-intent-43", sent_after=since
    )

    assert (found.ok, found.error_code, found.pages) == (False, "scan_incomplete", 1)


@pytest.mark.parametrize(
    ("value", "expected"),
    [("3", 3.0), ("0", 0.0), ("", None), ("soon", None), ("Wed, 21 Oct 2015 07:28:00 GMT", 0.0)],
)
def test_parse_retry_after(value, expected):
    assert provider.parse_retry_after(value) == expected


@pytest.mark.parametrize("value", ["inf", "Infinity", "-inf", "nan", "1e400"])
def test_parse_retry_after_refuses_a_number_that_is_not_finite(value):
    assert provider.parse_retry_after(value) is None


@pytest.mark.parametrize(
    "value", ["1000000000000", "1e18", "86401", "Fri, 31 Dec 9999 23:59:59 GMT"]
)
def test_parse_retry_after_clamps_a_wait_longer_than_a_day(value):
    """A longer wait than AgentMail keeps a key for means the same; unclamped, adding it to a
    datetime raised OverflowError in the worker's record step."""
    assert provider.parse_retry_after(value) == 86400.0


def test_parse_retry_after_http_date_in_the_future():
    assert provider.parse_retry_after("Wed, 21 Oct 2015 07:28:30 GMT", now=1445412480.0) == 30.0


def test_message_ids_are_encoded_for_paths():
    assert provider.encode_path_segment("<a/b?c#d@x.com>") == "%3Ca%2Fb%3Fc%23d@x.com%3E"


def test_a_cookie_the_provider_sets_never_rides_on_the_next_request():
    # One client per thread serves every tenant's key in turn: a Set-Cookie from one answer
    # must not reach the next request, whoever's it is. A loopback server sets one every time
    # and reports the Cookie header it was sent.
    import http.server
    import threading

    seen: list[str | None] = []

    class Handler(http.server.BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def do_GET(self):
            seen.append(self.headers.get("Cookie"))
            self.send_response(200)
            self.send_header("Set-Cookie", "session=tenant-a; Path=/")
            self.send_header("Content-Length", "2")
            self.end_headers()
            self.wfile.write(b"ok")

        def log_message(self, *args):
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        client = provider.http_client()
        url = f"http://127.0.0.1:{server.server_address[1]}/"
        first = client.get(url)
        second = client.get(url)
    finally:
        server.shutdown()
        server.server_close()
    assert first.headers["set-cookie"] and second.status_code == 200
    assert seen == [None, None]
    assert not client.cookies and dict(client.cookies) == {}


@pytest.mark.parametrize(
    ("status", "code", "message", "refused"),
    [
        (401, "unknown_api_key", "Unknown or revoked API key", True),
        (401, "missing_authorization", "", True),
        (403, "missing_permission", "Forbidden", True),
        (403, "http_403", "Forbidden", True),  # the gateway's bare 403
        (403, "message_rejected", "Recipient is suppressed", False),
        (404, "not_found", "Inbox not found", True),
        (404, "not_found", "Message not found", False),
        (422, "unprocessable", "", False),
        (500, "internal_error", "", False),
    ],
)
def test_refuses_key_names_only_answers_about_the_key_or_its_inbox(status, code, message, refused):
    assert provider.refuses_key(status, code, message) is refused


def test_a_key_the_http_library_refuses_is_not_quoted_in_the_recorded_error(mailbox, sandbox):
    """httpx (h11) refuses a header value with a stray newline before anything is sent, and its
    error quotes the value: ``Bearer`` and the key. The attempt's error text is shown to every
    reviewer of the tenant (SendAttempt.error_detail, the intent's last error)."""
    key = mailbox.api_key()

    result = provider.send_message(api_key=f"{key}\n", request=request_for(mailbox))

    assert result.error_code == "LocalProtocolError"
    assert result.error_message
    assert key not in result.error_message
