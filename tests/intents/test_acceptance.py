"""Issue 4's acceptance lines, on real PostgreSQL against the sandbox over HTTP. Every test counts
what the sandbox really received for the intent's idempotency key."""

import signal
import time
from datetime import timedelta

import pytest
import time_machine
from django.db.models.functions import Now
from django.utils import timezone

from intents import errors, sending, services, tasks
from intents.models import DraftVersion, IntentEvent, SendAttempt, SendIntent, Suppression
from mailboxes.models import Mailbox
from tenants.models import Membership, User
from tests.intents.conftest import start_worker
from tests.intents.helpers import run_concurrently

pytestmark = pytest.mark.django_db(transaction=True)


def sends(sandbox, intent):
    """Accepted sends the provider holds for this intent's key (its ledger)."""
    return sandbox.ledger(idempotency_key=intent.idempotency_key)


def calls(sandbox, intent):
    """Every HTTP request that reached the provider with this intent's key."""
    return sandbox.requests(idempotency_key=intent.idempotency_key)


def make_due(intent):
    SendIntent.objects.filter(pk=intent.pk).update(next_attempt_at=Now())


def step(worker="w"):
    """One claim (or reconciliation) of one due intent, as one worker tick."""
    return sending.run_once(worker=worker, limit=1)


def drive(intent, timeout=20.0):
    """Keep ticking until the intent is terminal or needs a person."""
    settled = (*SendIntent.TERMINAL, "needs_attention")
    deadline = time.monotonic() + timeout
    while SendIntent.objects.get(pk=intent.pk).state not in settled:
        assert time.monotonic() < deadline, "intent did not settle in time"
        make_due(intent)
        step("driver")
        time.sleep(0.1)


# How long a worker subprocess may take to start and make its first call: seconds when the machine
# is quiet, up to about 40 s when the suite's other processes share its two cores.
WORKER_START_TIMEOUT = 120.0


def wait_until(predicate, timeout=15.0, interval=0.05):
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, "condition not met in time"
        time.sleep(interval)


# --- happy path ----------------------------------------------------------------------------------


def test_approved_intent_is_sent_once_with_label_and_key(live):
    intent = live.approved(cc=["boss@example.com"])
    assert step() == 1
    intent.refresh_from_db()
    [sent] = sends(live.sandbox, intent)
    assert intent.state == "accepted"
    assert intent.provider_message_id == sent["message_id"]
    assert f"cs-intent-{intent.pk}" in sent["labels"]
    assert (sent["to"], sent["cc"], sent["subject"], sent["text"]) == (
        ["customer@example.com"],
        ["boss@example.com"],
        "Your refund",
        "We refunded your order.",
    )
    assert sent["inbox_id"] == live.mailbox.inbox_id
    assert list(SendAttempt.objects.filter(intent=intent).values_list("outcome", flat=True)) == [
        "accepted"
    ]


# --- two workers ---------------------------------------------------------------------------------


def test_two_worker_threads_one_wins_one_message(live):
    intent = live.approved()
    results = run_concurrently(lambda i: sending.run_once(worker=f"w{i}", intent_id=intent.pk), 8)
    intent.refresh_from_db()
    assert sorted(results) == [0] * 7 + [1]
    assert intent.state == "accepted"
    assert len(sends(live.sandbox, intent)) == 1
    assert len(calls(live.sandbox, intent)) == 1
    assert IntentEvent.objects.filter(intent=intent, action="intent.claimed").count() == 1


@pytest.mark.slow
def test_two_worker_processes_drain_without_duplicates(live):
    intents = [live.approved(subject=f"n{i}") for i in range(24)]
    # One call at a time per process, slow enough (24 x 0.4 s alone) that the second process is
    # up long before the first could drain everything by itself.
    live.sandbox.config(latency_ms=400)
    workers = [
        start_worker(live.sandbox, "--exit-when-idle", "--batch", "1", "--seconds", "60")
        for _ in range(2)
    ]
    outputs = [w.communicate(timeout=90) for w in workers]
    live.sandbox.config(latency_ms=0)
    assert [w.returncode for w in workers] == [0, 0], outputs
    states = set(SendIntent.objects.values_list("state", flat=True))
    assert states == {"accepted"}
    assert [len(sends(live.sandbox, i)) for i in intents] == [1] * 24
    owners = set(SendAttempt.objects.values_list("worker", flat=True))
    assert len({o.split(":")[1] for o in owners}) == 2  # both processes really sent


# --- lost response, crash, pause -----------------------------------------------------------------


def test_lost_response_is_reconciled_with_the_same_key(live):
    intent = live.approved()
    live.sandbox.fault("sends", "timeout_after_accept", delay=2)
    step()
    intent.refresh_from_db()
    assert intent.state == "uncertain"
    make_due(intent)
    step()
    intent.refresh_from_db()
    [sent] = sends(live.sandbox, intent)
    assert intent.state == "accepted"
    assert intent.provider_message_id == sent["message_id"]
    assert len(calls(live.sandbox, intent)) == 2
    kinds = list(
        SendAttempt.objects.filter(intent=intent).order_by("number").values_list("kind", "outcome")
    )
    assert kinds == [("send", "uncertain"), ("replay", "accepted")]


@pytest.mark.slow
def test_worker_killed_after_provider_accepted_before_recording(live):
    intent = live.approved()
    live.sandbox.fault("sends", "timeout_after_accept", delay=20)
    worker = start_worker(
        live.sandbox,
        "--once",
        "--intent",
        str(intent.pk),
        SEND_LEASE_SECONDS=2,
        AGENTMAIL_READ_TIMEOUT=30,
    )
    # The wait covers the worker's start-up (Django, a database connection), which takes well over
    # 20 s on a loaded two-core machine; the sandbox holds its answer for 20 s after the send is
    # in its ledger, so the kill still comes before the worker hears that it was accepted.
    live.sandbox.wait_for(lambda: sends(live.sandbox, intent), timeout=WORKER_START_TIMEOUT)
    worker.send_signal(signal.SIGKILL)
    worker.wait(timeout=10)
    live.sandbox.clear_faults()
    intent.refresh_from_db()
    assert intent.state == "sending"
    wait_until(
        lambda: SendIntent.objects.filter(pk=intent.pk, lease_expires_at__lte=Now()).exists()
    )
    tasks.sweep_once()
    intent.refresh_from_db()
    assert intent.state == "uncertain"
    step("w2")
    intent.refresh_from_db()
    [sent] = sends(live.sandbox, intent)
    assert intent.state == "accepted"
    assert intent.provider_message_id == sent["message_id"]
    assert len(calls(live.sandbox, intent)) == 2


@pytest.mark.slow
def test_paused_worker_past_its_lease_is_fenced(live):
    intent = live.approved()
    live.sandbox.fault("sends", "delay", delay=1.5)
    paused = start_worker(
        live.sandbox,
        "--once",
        "--intent",
        str(intent.pk),
        SEND_LEASE_SECONDS=2,
        AGENTMAIL_READ_TIMEOUT=30,
    )
    wait_until(
        lambda: SendAttempt.objects.filter(intent=intent, outcome="pending").exists(),
        WORKER_START_TIMEOUT,
    )
    paused.send_signal(signal.SIGSTOP)
    wait_until(
        lambda: SendIntent.objects.filter(pk=intent.pk, lease_expires_at__lte=Now()).exists()
    )
    tasks.sweep_once()
    make_due(intent)
    drive(intent)
    paused.send_signal(signal.SIGCONT)
    paused.communicate(timeout=30)
    intent.refresh_from_db()
    attempts = list(SendAttempt.objects.filter(intent=intent).order_by("number"))
    [sent] = sends(live.sandbox, intent)
    assert intent.state == "accepted"
    assert intent.provider_message_id == sent["message_id"]
    assert attempts[0].outcome == "fenced"
    assert attempts[-1].outcome == "accepted"
    late_writes = IntentEvent.objects.filter(intent=intent, actor_label=attempts[0].worker)
    assert list(late_writes.values_list("action", flat=True)) == ["intent.claimed"]


def test_same_job_enqueued_twice_makes_one_call(live):
    intent = live.approved()
    results = run_concurrently(lambda _: tasks.execute_intent(intent.pk), 2)
    tasks.execute_intent(intent.pk)
    intent.refresh_from_db()
    assert sorted(results) == [0, 1]
    assert intent.state == "accepted"
    assert len(calls(live.sandbox, intent)) == 1


# --- the 24 h window -----------------------------------------------------------------------------


@pytest.fixture
def day_later(live):
    """Our clock and the provider's clock 24 h ahead (the provider forgets completed keys)."""
    live.sandbox.advance_clock(24 * 3600 + 60)
    with time_machine.travel(timezone.now() + timedelta(hours=24, minutes=1), tick=True):
        yield
    live.sandbox.advance_clock(-(24 * 3600 + 60))


def test_unresolved_after_24h_needs_attention_without_resend(live, request):
    intent = live.approved()
    live.sandbox.fault("sends", "drop_before")
    step()
    intent.refresh_from_db()
    assert intent.state == "uncertain"
    request.getfixturevalue("day_later")
    make_due(intent)
    step()
    intent.refresh_from_db()
    assert intent.state == "needs_attention"
    assert sends(live.sandbox, intent) == []
    assert len(calls(live.sandbox, intent)) == 1
    assert list(
        SendAttempt.objects.filter(intent=intent).order_by("number").values_list("kind", flat=True)
    ) == ["send", "lookup"]


def test_unresolved_after_24h_found_by_label_is_accepted(live, request):
    intent = live.approved()
    live.sandbox.fault("sends", "timeout_after_accept", delay=2)
    step()
    request.getfixturevalue("day_later")
    make_due(intent)
    step()
    intent.refresh_from_db()
    [sent] = sends(live.sandbox, intent)
    assert intent.state == "accepted"
    assert intent.provider_message_id == sent["message_id"]
    assert len(calls(live.sandbox, intent)) == 1


def test_retry_later_past_the_window_fails_without_sending(live, request, settings):
    intent = live.approved()
    settings.AGENTMAIL_BASE_URL = "http://127.0.0.1:9"
    step()
    settings.AGENTMAIL_BASE_URL = live.sandbox.base_url
    request.getfixturevalue("day_later")
    make_due(intent)
    step()
    intent.refresh_from_db()
    assert (intent.state, intent.last_error_code) == ("failed", "max_age")
    assert calls(live.sandbox, intent) == []


# --- contract checks before the call -------------------------------------------------------------


def test_content_changed_after_approval_needs_new_approval(live):
    intent = live.approved()
    with pytest.raises(errors.NotPending):
        services.draft_add_version(
            tenant=live.tenant,
            draft_id=intent.draft_id,
            to=["other@example.com"],
            cc=[],
            bcc=[],
            subject="Changed",
            text="Changed",
            html="",
            actor_user=live.approver,
        )
    DraftVersion.objects.filter(pk=intent.draft_version_id).update(text="Tampered after approval")
    step()
    intent.refresh_from_db()
    assert (intent.state, intent.last_error_code) == ("blocked", "hash_mismatch")
    assert calls(live.sandbox, intent) == []


def test_recipients_changed_after_approval_are_blocked(live):
    intent = live.approved()
    DraftVersion.objects.filter(pk=intent.draft_version_id).update(to=["attacker@example.com"])
    step()
    intent.refresh_from_db()
    assert intent.state == "blocked"
    assert calls(live.sandbox, intent) == []


def test_other_tenants_approver_or_mailbox_refused_before_any_call(
    live, tenant_b, member_of, mailbox_factory
):
    before = len(live.sandbox.requests(route="send"))
    foreign_mailbox = mailbox_factory(tenant_b)
    with pytest.raises(errors.NotFound):
        services.draft_create(
            tenant=live.tenant,
            mailbox=foreign_mailbox.pk,
            to=["a@example.com"],
            subject="s",
            text="t",
            actor_user=live.approver,
        )
    admin_b = member_of(tenant_b, "admin").user
    draft = services.draft_create(
        tenant=live.tenant,
        mailbox=live.mailbox,
        to=["a@example.com"],
        subject="s",
        text="t",
        actor_user=live.approver,
    )
    with pytest.raises(errors.NoRight):
        services.draft_approve(
            tenant=live.tenant,
            draft_id=draft.pk,
            version=1,
            content_hash=draft.versions.get().content_hash,
            actor=admin_b,
        )
    intent = live.approved()
    SendIntent.objects.filter(pk=intent.pk).update(mailbox=foreign_mailbox)
    step()
    intent.refresh_from_db()
    assert (intent.state, intent.last_error_code) == ("blocked", "mailbox_foreign")
    assert len(live.sandbox.requests(route="send")) == before


REVOCATIONS = {
    "membership": lambda m: Membership.objects.filter(pk=m.pk).update(is_active=False),
    "mailbox_right": lambda m: Membership.objects.filter(pk=m.pk).update(
        approve_all_mailboxes=False
    ),
    "role": lambda m: Membership.objects.filter(pk=m.pk).update(role="viewer"),
    "user": lambda m: User.objects.filter(pk=m.user_id).update(is_active=False),
}


@pytest.mark.parametrize("revoke", sorted(REVOCATIONS))
def test_right_revoked_before_execution_blocks_with_zero_calls(live, revoke):
    intent = live.approved()
    REVOCATIONS[revoke](live.approver.memberships.get(tenant=live.tenant))
    step()
    intent.refresh_from_db()
    assert (intent.state, intent.last_error_code) == ("blocked", "approver_no_right")
    assert calls(live.sandbox, intent) == []


def test_disabled_mailbox_suspended_tenant_and_suppression_block(live):
    first, second, third = live.approved(), live.approved(), live.approved(to=["later@example.com"])
    Mailbox.objects.filter(pk=live.mailbox.pk).update(status="disabled")
    sending.run_once(worker="w", intent_id=first.pk)
    Mailbox.objects.filter(pk=live.mailbox.pk).update(status="active")
    type(live.tenant).objects.filter(pk=live.tenant.pk).update(status="suspended")
    sending.run_once(worker="w", intent_id=second.pk)
    type(live.tenant).objects.filter(pk=live.tenant.pk).update(status="active")
    Suppression.objects.create(tenant=live.tenant, address="later@example.com", reason="bounced")
    sending.run_once(worker="w", intent_id=third.pk)
    codes = [SendIntent.objects.get(pk=i.pk).last_error_code for i in (first, second, third)]
    assert codes == ["mailbox_inactive", "tenant_inactive", "recipient_suppressed"]
    assert [calls(live.sandbox, i) for i in (first, second, third)] == [[], [], []]


def test_not_after_passed_expires_without_call(live):
    intent = live.approved(not_after=timezone.now() + timedelta(hours=1))
    SendIntent.objects.filter(pk=intent.pk).update(not_after=Now())
    assert step() == 0
    tasks.sweep_once()
    intent.refresh_from_db()
    assert intent.state == "expired"
    assert calls(live.sandbox, intent) == []


def test_held_intent_is_not_claimed_until_released(live):
    intent = live.approved()
    services.intent_hold(tenant=live.tenant, intent_id=intent.pk, reason="customer wrote again")
    assert step() == 0
    services.intent_release(tenant=live.tenant, intent_id=intent.pk, actor=live.approver)
    assert step() == 1
    assert len(sends(live.sandbox, intent)) == 1


# --- classification ------------------------------------------------------------------------------


def test_422_fails_after_exactly_one_attempt_with_error_stored(live):
    intent = live.approved()
    live.sandbox.fault("sends", "422_unprocessable")
    step()
    make_due(intent)
    step()
    intent.refresh_from_db()
    assert (intent.state, intent.attempts, intent.last_error_code) == ("failed", 1, "unprocessable")
    assert "422" in intent.last_error_detail
    assert len(calls(live.sandbox, intent)) == 1


def test_429_retry_after_is_a_floor(live):
    intent = live.approved()
    live.sandbox.fault("sends", "429", retry_after=7)
    step()
    intent.refresh_from_db()
    attempt = SendAttempt.objects.get(intent=intent)
    assert intent.state == "queued"
    assert intent.next_attempt_at - attempt.finished_at >= timedelta(seconds=7)
    assert step() == 0
    assert len(calls(live.sandbox, intent)) == 1


def test_rejected_recipient_fails_and_is_suppressed(live):
    first = live.approved(to=["bounce-me@example.com"])
    step()
    first.refresh_from_db()
    live.sandbox.trigger(
        first.provider_message_id, "message.bounced", recipients=["bounce-me@example.com"]
    )
    live.sandbox.wait_for(lambda: live.sandbox.suppressions())
    second = live.approved(to=["bounce-me@example.com"])
    step()
    second.refresh_from_db()
    assert (second.state, second.last_error_code) == ("failed", "message_rejected")
    assert Suppression.objects.filter(
        tenant=live.tenant, address="bounce-me@example.com", reason="rejected"
    ).exists()
    assert sends(live.sandbox, second) == []


@pytest.mark.parametrize("fault", ["500_after", "html_2xx_after"])
def test_an_answer_after_processing_that_says_nothing_is_uncertain_then_replayed_once(live, fault):
    """A 5xx after AgentMail processed the send, or a gateway's "OK" page that is not JSON (the
    SDK raises with status 200; it was classified permanent, so the intent failed and a person
    could send it again: an outside probe counted two sends). Either is uncertain: the replay
    with the same key proves it."""
    intent = live.approved()
    live.sandbox.fault("sends", fault)
    step()
    intent.refresh_from_db()
    assert intent.state == "uncertain"
    make_due(intent)
    step()
    intent.refresh_from_db()
    assert intent.state == "accepted"
    assert len(sends(live.sandbox, intent)) == 1


def test_connection_refused_is_retried_later(live, settings):
    intent = live.approved()
    settings.AGENTMAIL_BASE_URL = "http://127.0.0.1:9"
    step()
    intent.refresh_from_db()
    assert (intent.state, intent.attempts) == ("queued", 1)
    settings.AGENTMAIL_BASE_URL = live.sandbox.base_url
    make_due(intent)
    step()
    intent.refresh_from_db()
    assert intent.state == "accepted"
    assert len(sends(live.sandbox, intent)) == 1


def test_max_attempts_fails(live, settings):
    settings.SEND_MAX_ATTEMPTS = 2
    intent = live.approved()
    settings.AGENTMAIL_BASE_URL = "http://127.0.0.1:9"
    step()
    make_due(intent)
    step()
    intent.refresh_from_db()
    assert (intent.state, intent.last_error_code, intent.attempts) == ("failed", "max_attempts", 2)
    assert calls(live.sandbox, intent) == []


# --- journal -------------------------------------------------------------------------------------


def test_every_transition_is_journaled(live):
    intent = live.approved()
    live.sandbox.fault("sends", "503_before")
    step()
    make_due(intent)
    step()
    make_due(intent)
    step()
    path = list(
        IntentEvent.objects.filter(intent=intent)
        .order_by("id")
        .values_list("from_state", "to_state")
    )
    assert path == [
        ("pending", "approved"),
        ("", "queued"),
        ("queued", "sending"),
        ("sending", "uncertain"),
        ("uncertain", "accepted"),
    ]
