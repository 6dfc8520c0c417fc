"""A whole AgentMail call ends within AGENTMAIL_CONNECT_TIMEOUT + AGENTMAIL_READ_TIMEOUT, however
the other end answers (mailboxes.provider.deadline). httpx's own timeouts are per socket
operation: an answer dripped a byte at a time, each byte inside the read timeout, or a request
read a little at a time, each write inside the write timeout, held a call for as long as the
other end liked. Counted in the sandbox's ledger where the sandbox can play the fault."""

import socket
import time
import uuid

import pytest

from mailboxes import provider
from mailboxes.provider import Outcome
from tests.mailboxes.test_provider import request_for, send
from tests.raw_server import RawReceiver

pytestmark = pytest.mark.django_db

# The sandbox's answer to a send is about 400 bytes: dripped at this pace it takes about 40 s,
# each byte well inside the read timeout below.
DRIP_SECONDS = 0.1
# The calls' whole budget here: 0.3 + 0.5 s.
CONNECT, READ = 0.3, 0.5
# Far above the budget (a loaded CI machine), far below what the fault would take without it.
BOUND = 10.0


@pytest.fixture
def mailbox(tenant_a, mailbox_factory):
    return mailbox_factory(tenant_a)


@pytest.fixture
def short_calls(settings):
    settings.AGENTMAIL_CONNECT_TIMEOUT = CONNECT
    settings.AGENTMAIL_READ_TIMEOUT = READ
    return settings


def timed(call):
    started = time.monotonic()
    result = call()
    return result, time.monotonic() - started


def test_the_budget_is_connect_plus_read(short_calls):
    assert provider.call_seconds() == pytest.approx(CONNECT + READ)


def test_a_dripped_answer_ends_at_the_deadline_as_uncertain_and_the_replay_sends_nothing_new(
    mailbox, sandbox, short_calls
):
    sandbox.fault("send", "drip_after", delay=DRIP_SECONDS)
    request = request_for(mailbox)
    lost, took = timed(lambda: send(mailbox, request))
    assert lost.outcome == Outcome.UNCERTAIN
    assert lost.error_code == "ReadTimeout"
    assert CONNECT + READ - 0.05 <= took < BOUND
    # The same thread's client goes on: the cut connection is dropped, a new one made.
    replay = send(mailbox, request)
    assert replay.outcome == Outcome.ACCEPTED
    ledger = sandbox.ledger(idempotency_key=request.idempotency_key)
    assert [s["message_id"] for s in ledger] == [replay.message_id]


def test_each_call_has_its_own_budget(mailbox, sandbox, short_calls):
    """The deadline starts with each request: calls one after another, each inside the budget,
    all succeed although together they take longer than it."""
    sandbox.fault("send", "delay", delay=0.3, times=4)
    results, took = timed(lambda: [send(mailbox, request_for(mailbox)) for _ in range(4)])
    assert [r.outcome for r in results] == [Outcome.ACCEPTED] * 4
    assert took > CONNECT + READ


def test_a_dripped_lookup_ends_at_the_deadline_as_a_failed_lookup(mailbox, sandbox, short_calls):
    sandbox.fault("list_messages", "drip_after", delay=DRIP_SECONDS)
    result, took = timed(
        lambda: provider.find_messages_by_label(
            api_key=mailbox.api_key(), inbox_id=mailbox.inbox_id, label="cs-intent-1"
        )
    )
    assert not result.ok
    assert result.error_code == "ReadTimeout"
    assert took < BOUND


def test_a_request_read_slowly_ends_at_the_deadline_as_uncertain(mailbox, short_calls):
    """A 64 MiB request read at about 5 MB/s, each write going through inside the write timeout:
    without the deadline the whole of it goes (about 12 s); with it, the call is cut at its
    deadline as a write timeout (part of it may have gone: uncertain, never 'not sent')."""
    short_calls.AGENTMAIL_READ_TIMEOUT = 1.0  # a write waits at most 0.4 s here, under load too
    body = 64 * 2**20
    received = []

    def reads_slowly(server: RawReceiver, conn: socket.socket) -> None:
        while not server.stop.is_set() and (chunk := conn.recv(256 * 1024)):
            received.append(len(chunk))
            time.sleep(0.05)

    server = RawReceiver(reads_slowly)
    try:
        short_calls.AGENTMAIL_BASE_URL = f"http://127.0.0.1:{server.listener.getsockname()[1]}"
        request = request_for(mailbox, key=f"k-{uuid.uuid4().hex}", text="x" * body)
        result, took = timed(lambda: send(mailbox, request))
    finally:
        server.close()
    assert result.outcome == Outcome.UNCERTAIN
    assert result.error_code == "WriteTimeout"
    assert sum(received) < body / 2
    assert took < BOUND


def test_the_calls_of_a_block_end_together_and_the_block_ends_with_them(mailbox, sandbox, settings):
    """``calls_within``: three calls of 1 s each in a block of 1.6 s. The first goes through,
    the second is cut in its read (it was sent: uncertain), the third is not even begun (nothing
    sent: to be retried); after the block, calls have their own budget again."""
    settings.AGENTMAIL_CONNECT_TIMEOUT = 1.0
    settings.AGENTMAIL_READ_TIMEOUT = 3.0
    sandbox.fault("send", "delay", delay=1.0, times=3)
    requests = [request_for(mailbox) for _ in range(3)]
    before = len(sandbox.requests(route="send"))
    with provider.calls_within(1.6):
        results = [send(mailbox, r) for r in requests]
    after = send(mailbox, request_for(mailbox))

    assert [r.outcome for r in results] == [
        Outcome.ACCEPTED,
        Outcome.UNCERTAIN,
        Outcome.RETRY_LATER,
    ]
    assert [r.error_code for r in results[1:]] == ["ReadTimeout", "ConnectTimeout"]
    assert after.outcome == Outcome.ACCEPTED
    assert len(sandbox.requests(route="send")) - before == 3  # the third never reached it
