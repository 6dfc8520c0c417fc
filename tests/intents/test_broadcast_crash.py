"""Issue 19's acceptance line, small: 300 recipients, 6 suppressed, the worker process killed
with SIGKILL twice during the fan-out and twice during sending; exactly 294 sends in the
sandbox's ledger, one per recipient and per key (``make broadcast-crash`` runs 5,000 / 100)."""

import pytest

from reliability.broadcast_crash import run_crash
from tests.intents.conftest import worker_env

# Four worker start-ups: on a loaded machine they alone can take minutes.
pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow, pytest.mark.timeout(900)]


def test_killed_four_times_still_one_send_per_recipient(live):
    env = worker_env(
        live.sandbox,
        SEND_LEASE_SECONDS=2,
        SEND_RATE_PER_KEY=400,
        SEND_BURST_PER_KEY=400,
        BROADCAST_RATE_PER_SECOND=100,
        BROADCAST_FANOUT_PAGE=10,
        BROADCAST_FANOUT_PAGE_PAUSE_SECONDS=0.05,
        SEND_BACKOFF_BASE_SECONDS=0.05,
        SEND_BACKOFF_CAP_SECONDS=0.5,
        AGENTMAIL_READ_TIMEOUT=2,
    )
    figures = run_crash(
        sandbox=live.sandbox,
        tenant=live.tenant,
        mailbox=live.mailbox,
        approver=live.approver,
        recipients=300,
        suppressed=6,
        env=env,
        timeout=90,
        log=print,
    )
    assert len(figures["kills"]) == 4, figures
    assert (figures["sends"], figures["unique_keys"], figures["unique_recipients"]) == (
        294,
        294,
        294,
    )
    assert (figures["to_suppressed"], figures["multi_recipient_sends"]) == (0, 0)
    assert figures["intent_states"] == {"accepted": 294}
