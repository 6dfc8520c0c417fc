"""The pre-call check's locked read in plain SQL (``intents.sending.locked``) against the ORM query
it replaced: the same rows and related rows, the same fence on the lease token, the same
treatment of expired leases and of intents no longer leased, and the rows really locked."""

from __future__ import annotations

import threading
import uuid
from datetime import timedelta

import pytest
from django.db import DatabaseError, connections, transaction
from django.db.models import OuterRef, Subquery, Value
from django.db.models.functions import Coalesce, Now
from django.utils import timezone

from intents import sending
from intents.models import SendAttempt, SendIntent
from intents.sending.locked import lock_leased

pytestmark = pytest.mark.django_db(transaction=True)

State = SendIntent.State
RELATED = ("tenant", "mailbox", "draft", "draft_version", "broadcast", "broadcast_recipient")


def orm_lock_leased(tokens: dict, *, live: bool = True) -> dict:
    """The ORM version this module replaced, verbatim in what it selects and fences."""
    qs = SendIntent.objects.select_for_update(of=("self",)).filter(
        pk__in=list(tokens), state__in=(State.SENDING, State.UNCERTAIN)
    )
    if live:
        qs = qs.filter(lease_expires_at__gt=Now())
    last = SendAttempt.objects.filter(intent_id=OuterRef("pk")).order_by("-number")
    rows = (
        qs.select_related(*RELATED)
        .annotate(
            db_now=Now(),
            next_attempt_number=Coalesce(Subquery(last.values("number")[:1]), Value(0)) + 1,
        )
        .order_by("id")
    )
    return {row.pk: row for row in rows if row.lease_token == tokens[row.pk]}


def _values(obj) -> dict:
    return {f.attname: getattr(obj, f.attname) for f in type(obj)._meta.concrete_fields}


def _claimed(live, n: int) -> tuple[list[SendIntent], dict]:
    intents = [live.approved(to=[f"customer{i}@example.com"]) for i in range(n)]
    claims = sending.intent_claim(worker="locked-read", limit=n)
    assert sorted(c.intent_id for c in claims) == sorted(i.pk for i in intents)
    return intents, {c.intent_id: c.lease_token for c in claims}


def test_the_plain_read_builds_what_the_orm_read_built(live):
    _, tokens = _claimed(live, 3)
    SendAttempt.objects.create(
        intent_id=min(tokens),
        tenant=live.tenant,
        number=1,
        kind=SendAttempt.Kind.SEND,
        worker="earlier",
        lease_token=uuid.uuid4(),
        started_at=timezone.now(),
    )

    with transaction.atomic():
        plain = lock_leased(tokens)
    with transaction.atomic():
        orm = orm_lock_leased(tokens)

    assert sorted(plain) == sorted(orm) == sorted(tokens)
    for pk, row in orm.items():
        assert _values(plain[pk]) == _values(row)
        for name in RELATED:
            mine, theirs = getattr(plain[pk], name), getattr(row, name)
            assert (mine is None) == (theirs is None), name
            if theirs is not None:
                assert _values(mine) == _values(theirs), name
        assert plain[pk].next_attempt_number == row.next_attempt_number
        assert plain[pk].db_now is not None
    assert [plain[pk].next_attempt_number for pk in sorted(plain)] == [2, 1, 1]
    assert isinstance(plain[min(tokens)].recipients, dict)  # jsonb decoded by the field


def test_it_fences_on_the_lease_token_and_the_lease_exactly_like_the_orm_read(live):
    intents, tokens = _claimed(live, 4)
    taken, expired, requeued = intents[1].pk, intents[2].pk, intents[3].pk
    # Another worker took one over, one lease ran out, and one went back to the queue.
    SendIntent.objects.filter(pk=taken).update(lease_token=uuid.uuid4())
    SendIntent.objects.filter(pk=expired).update(
        lease_expires_at=timezone.now() - timedelta(seconds=5)
    )
    SendIntent.objects.filter(pk=requeued).update(state=State.QUEUED)

    for live_only, expected in ((True, {intents[0].pk}), (False, {intents[0].pk, expired})):
        with transaction.atomic():
            plain = lock_leased(tokens, live=live_only)
        with transaction.atomic():
            orm = orm_lock_leased(tokens, live=live_only)
        assert set(plain) == set(orm) == expected


def test_the_rows_it_returns_are_locked_until_the_commit(live):
    _, tokens = _claimed(live, 2)
    outcome: list[str] = []

    def try_lock() -> None:
        try:
            with transaction.atomic():
                list(SendIntent.objects.select_for_update(nowait=True).filter(pk__in=list(tokens)))
            outcome.append("locked by nobody")
        except DatabaseError:
            outcome.append("held")
        finally:
            connections.close_all()

    with transaction.atomic():
        assert sorted(lock_leased(tokens)) == sorted(tokens)
        other = threading.Thread(target=try_lock)
        other.start()
        other.join(30)
    after = threading.Thread(target=try_lock)
    after.start()
    after.join(30)

    assert outcome == ["held", "locked by nobody"]
