"""A Hypothesis state machine over drafts, approvals, worker ticks with provider faults, worker
crashes and clock jumps, against the sandbox over HTTP. After every step: at most one intent per
draft version, at most one accepted send per idempotency key, what was sent is what was approved,
states move only along DESIGN.md's table, and every transition is journaled."""

from __future__ import annotations

import contextlib
import itertools
from datetime import timedelta

import pytest
from django.db.models import F
from django.db.models.functions import Now
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    initialize,
    invariant,
    precondition,
    rule,
)

from intents import errors, sending, services, tasks
from intents.models import Draft, IntentEvent, SendIntent
from tenants.models import AgentToken, Membership
from tests.sizes import size

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]

ALLOWED = {
    ("", "queued"),
    ("queued", "queued"),
    ("queued", "sending"),
    ("queued", "expired"),
    ("queued", "cancelled"),
    ("queued", "blocked"),
    ("sending", "accepted"),
    ("sending", "queued"),
    ("sending", "uncertain"),
    ("sending", "failed"),
    ("sending", "blocked"),
    ("uncertain", "uncertain"),
    ("uncertain", "accepted"),
    ("uncertain", "needs_attention"),
    ("needs_attention", "accepted"),
    ("needs_attention", "cancelled"),
}
FAULTS = [
    None,
    "429",
    "500_after",
    "503_before",
    "timeout_after_accept",
    "drop_before",
    "drop_after",
    "409_in_progress",
    "422_unprocessable",
]
# Drawn without repeats: a draft naming a recipient twice is refused (duplicate_recipient).
ADDRESSES = ["a@example.com", "b@example.com", "c@example.org"]


def run_machine(live):
    agent = AgentToken.objects.create(
        tenant=live.tenant,
        name="hyp",
        prefix="hypagent",
        digest="0" * 64,
        scopes=["drafts:write"],
        all_mailboxes=True,
    )

    class SendMachine(RuleBasedStateMachine):
        def __init__(self):
            super().__init__()
            self.drafts: list[int] = []
            self.offset = 0.0

        def teardown(self):
            live.sandbox.advance_clock(-self.offset)
            live.sandbox.clear_faults()
            Membership.objects.filter(user=live.approver).update(is_active=True)

        @rule(
            to=st.lists(st.sampled_from(ADDRESSES), min_size=1, max_size=2, unique=True),
            n=st.integers(0, 9),
        )
        def create_draft(self, to, n):
            draft = services.draft_create(
                tenant=live.tenant,
                mailbox=live.mailbox,
                to=to,
                subject=f"Subject {n}",
                text=f"Body {n}",
                agent_token=agent,
            )
            self.drafts.append(draft.pk)

        @initialize()
        def approved_draft(self):
            self.create_and_approve(to=["a@example.com"], n=0)

        @rule(
            to=st.lists(st.sampled_from(ADDRESSES), min_size=1, max_size=2, unique=True),
            n=st.integers(0, 9),
        )
        def create_and_approve(self, to, n):
            self.create_draft(to, n)
            draft = Draft.objects.get(pk=self.drafts[-1])
            with contextlib.suppress(errors.NoRight):
                services.draft_approve(
                    tenant=live.tenant,
                    draft_id=draft.pk,
                    version=1,
                    content_hash=draft.versions.get().content_hash,
                    actor=live.approver,
                )

        @precondition(lambda self: self.drafts)
        @rule(data=st.data(), n=st.integers(0, 9))
        def add_version(self, data, n):
            draft_id = data.draw(st.sampled_from(self.drafts))
            with contextlib.suppress(errors.NotPending, errors.NoRight):
                services.draft_add_version(
                    tenant=live.tenant,
                    draft_id=draft_id,
                    to=["a@example.com"],
                    cc=[],
                    bcc=[],
                    subject=f"Edited {n}",
                    text=f"Edited body {n}",
                    html="",
                    agent_token=agent,
                )

        @precondition(lambda self: self.drafts)
        @rule(data=st.data(), stale=st.booleans())
        def approve(self, data, stale):
            draft = Draft.objects.get(pk=data.draw(st.sampled_from(self.drafts)))
            number = 1 if stale else draft.current_version
            version = draft.versions.get(number=number)
            with contextlib.suppress(errors.StaleVersion, errors.NotPending, errors.NoRight):
                services.draft_approve(
                    tenant=live.tenant,
                    draft_id=draft.pk,
                    version=number,
                    content_hash=version.content_hash,
                    actor=live.approver,
                )

        @precondition(lambda self: self.drafts)
        @rule(data=st.data())
        def reject(self, data):
            with contextlib.suppress(errors.NotPending, errors.NoRight):
                services.draft_reject(
                    tenant=live.tenant,
                    draft_id=data.draw(st.sampled_from(self.drafts)),
                    reason="no",
                    actor=live.approver,
                )

        @rule(fault=st.sampled_from(FAULTS), limit=st.integers(1, 3))
        def worker_tick(self, fault, limit):
            if fault:
                live.sandbox.fault("sends", fault, delay=1.5, retry_after=0)
            SendIntent.objects.filter(state__in=["queued", "uncertain"]).update(
                next_attempt_at=Now()
            )
            sending.run_once(worker="hyp", limit=limit)
            live.sandbox.clear_faults()

        @rule(after_attempt_row=st.booleans())
        def worker_crash(self, after_attempt_row):
            claims = sending.intent_claim(worker="doomed", limit=1)
            for claim in claims:
                if after_attempt_row:
                    sending.intent_begin_attempt(claim)
            SendIntent.objects.filter(lease_owner="doomed").update(
                lease_expires_at=Now() - timedelta(seconds=1)
            )
            tasks.sweep_once()

        @rule(hours=st.sampled_from([1, 6, 25]))
        def clock_jump(self, hours):
            # Time passes for everyone: the provider's clock moves on (it forgets keys after
            # 24 h) and our rows age by the same amount (the database clock cannot be moved).
            delta = timedelta(hours=hours)
            self.offset += hours * 3600
            live.sandbox.advance_clock(hours * 3600)
            SendIntent.objects.filter(first_attempt_at__isnull=False).update(
                first_attempt_at=F("first_attempt_at") - delta
            )
            Draft.objects.update(review_deadline=F("review_deadline") - delta)

        @rule(active=st.booleans())
        def toggle_right(self, active):
            Membership.objects.filter(user=live.approver).update(is_active=active)

        @rule()
        def sweep(self):
            tasks.sweep_once()

        @invariant()
        def one_intent_per_version_and_draft(self):
            assert (
                SendIntent.objects.count() == SendIntent.objects.values("draft").distinct().count()
            )

        @invariant()
        def at_most_one_send_per_key_and_sent_is_approved(self):
            ledger = live.sandbox.ledger(inbox_id=live.mailbox.inbox_id)
            keys = [row["idempotency_key"] for row in ledger]
            assert len(keys) == len(set(keys))
            intents = {
                i.idempotency_key: i
                for i in SendIntent.objects.select_related("draft_version").filter(
                    idempotency_key__in=keys
                )
            }
            assert set(intents) == set(keys)
            for row in ledger:
                intent = intents[row["idempotency_key"]]
                version = intent.draft_version
                assert (row["subject"], row["text"], row["to"]) == (
                    version.subject,
                    version.text,
                    list(version.to),
                )
                assert intent.state in {"accepted", "uncertain", "needs_attention", "sending"}
            accepted = SendIntent.objects.filter(state="accepted")
            assert all(i.idempotency_key in set(keys) for i in accepted)

        @invariant()
        def states_move_along_the_table_and_are_journaled(self):
            for intent in SendIntent.objects.all():
                path = list(
                    IntentEvent.objects.filter(intent=intent)
                    .exclude(action__startswith="draft.")
                    .order_by("id")
                    .values_list("from_state", "to_state")
                )
                assert set(path) <= ALLOWED
                assert all(a[1] == b[0] for a, b in itertools.pairwise(path))
                assert path[-1][1] == intent.state

    SendMachine.TestCase.settings = settings(
        max_examples=size(12, 60),
        stateful_step_count=15,
        deadline=None,
        suppress_health_check=list(HealthCheck),
        database=None,
        derandomize=True,
    )
    SendMachine.TestCase().runTest()


def test_send_state_machine(live):
    # No wall-clock budget (it was < 120 s, which a loaded machine can miss): the machine's clock
    # jumps shift stored timestamps, no step sleeps, and a hang is stopped by pytest-timeout.
    run_machine(live)
    assert SendIntent.objects.filter(state="accepted").exists()
