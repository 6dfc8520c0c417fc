"""The batch's locked read for the pre-call check, in plain SQL.

One statement locks the batch's leased intents (``FOR UPDATE OF`` the intent only, in id order)
and reads with them their tenant, mailbox, draft, approved version, broadcast and recipient row,
the database clock and each intent's next attempt number. It is the query
``SendIntent.objects.select_for_update(of=("self",)).select_related(...)`` would send, written
once per process: profiled (``python -m bench --only phases``), compiling that query and
populating its six related objects through Django's select_related machinery was the largest
single cost of the worker's main thread. The rows become the same model instances, through each
field's own database converters (Django reads jsonb as text and decodes it in the field).
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from django.db import connection
from django.db.models import ForeignKey, Model

from intents.models import (
    Broadcast,
    BroadcastRecipient,
    Draft,
    DraftVersion,
    SendAttempt,
    SendIntent,
)
from mailboxes.models import Mailbox
from tenants.models import Tenant

State = SendIntent.State
LEASED_STATES = [State.SENDING, State.UNCERTAIN]


@dataclass(frozen=True)
class _Part:
    """One model's columns in the statement: where they start, their names, their converters."""

    model: type[Model]
    alias: str
    relation: str  # the SendIntent field that holds it ("" for the intent itself)
    start: int
    attnames: tuple[str, ...]
    converters: tuple[tuple[int, tuple, Any], ...]  # (column offset, converters, column)

    def build(self, row: Sequence[Any]) -> Model | None:
        values = list(row[self.start : self.start + len(self.attnames)])
        if values[0] is None:  # the primary key of a LEFT JOIN's missing row
            return None
        for offset, converters, column in self.converters:
            for convert in converters:
                values[offset] = convert(values[offset], column, connection)
        return self.model.from_db(connection.alias, self.attnames, values)


_RELATED = (
    (Tenant, "t", "tenant", "JOIN"),
    (Mailbox, "m", "mailbox", "JOIN"),
    (Draft, "d", "draft", "LEFT JOIN"),
    (DraftVersion, "v", "draft_version", "LEFT JOIN"),
    (Broadcast, "b", "broadcast", "LEFT JOIN"),
    (BroadcastRecipient, "r", "broadcast_recipient", "LEFT JOIN"),
)


@functools.cache
def _relation(name: str) -> ForeignKey:
    field = SendIntent._meta.get_field(name)
    assert isinstance(field, ForeignKey)  # OneToOneField is one too
    return field


def _column(field: Any) -> str:
    return connection.ops.quote_name(str(field.column))


@functools.cache
def _statement() -> tuple[str, tuple[_Part, ...]]:
    qn = connection.ops.quote_name
    parts: list[_Part] = []
    columns: list[str] = []
    for model, alias, relation in (
        (SendIntent, "i", ""),
        *((m, a, rel) for m, a, rel, _ in _RELATED),
    ):
        fields = model._meta.concrete_fields
        converters = []
        for offset, field in enumerate(fields):
            column = field.get_col(alias)
            found = tuple(
                connection.ops.get_db_converters(column) + field.get_db_converters(connection)
            )
            if found:
                converters.append((offset, found, column))
        parts.append(
            _Part(
                model=model,
                alias=alias,
                relation=relation,
                start=len(columns),
                attnames=tuple(f.attname for f in fields),
                converters=tuple(converters),
            )
        )
        columns += [f"{alias}.{_column(f)}" for f in fields]
    joins = " ".join(
        f"{kind} {qn(model._meta.db_table)} {alias} ON {alias}.{_column(model._meta.pk)} = "
        f"i.{_column(_relation(relation))}"
        for model, alias, relation, kind in _RELATED
    )
    sql = (
        f"SELECT {', '.join(columns)}, statement_timestamp(), COALESCE((SELECT a.number FROM "  # noqa: S608
        f"{qn(SendAttempt._meta.db_table)} a WHERE a.intent_id = i.id ORDER BY a.number DESC "
        f"LIMIT 1), 0) + 1 FROM {qn(SendIntent._meta.db_table)} i {joins} "
        "WHERE i.id = ANY(%s) AND i.state = ANY(%s) "
        "AND (%s OR i.lease_expires_at > statement_timestamp()) "
        "ORDER BY i.id FOR UPDATE OF i"
    )
    return sql, tuple(parts)


def lock_leased(tokens: dict[int, Any], *, live: bool = True) -> dict[int, SendIntent]:
    """The intents of ``tokens`` (intent id -> our lease token) still leased to us, locked, with
    their related rows cached as select_related would, and two annotations: ``db_now`` and
    ``next_attempt_number``. A row in ``sending``/``uncertain`` whose lease token is not ours is
    locked until our commit but left out (the fence); with ``live``, so is an expired lease."""
    if not tokens:
        return {}
    sql, parts = _statement()
    with connection.cursor() as cursor:
        cursor.execute(sql, [sorted(tokens), LEASED_STATES, not live])
        rows = cursor.fetchall()
    out: dict[int, SendIntent] = {}
    intent_part, related = parts[0], parts[1:]
    for row in rows:
        intent = intent_part.build(row)
        assert isinstance(intent, SendIntent)
        if intent.lease_token != tokens[intent.pk]:
            continue
        for part in related:
            _relation(part.relation).set_cached_value(intent, part.build(row))
        intent.db_now, intent.next_attempt_number = row[-2], row[-1]  # type: ignore[attr-defined]
        out[intent.pk] = intent
    return out


def hold_broadcasts(intents: Sequence[SendIntent]) -> None:
    """Share-lock the batch's broadcasts until the pre-call check commits, and read their state
    again under that lock.

    The state ``lock_leased`` read is its statement's snapshot, and a pause or cancellation
    (``FOR UPDATE`` of the broadcast, then the new state) committing after that read went
    unseen: the check passed, the attempt row was committed after the cancellation, and the
    call went out after it. Under this lock the pause or cancellation waits for the batch's
    attempt rows (those calls are in flight, recorded), or the batch waits for it and sees the
    new state. A new statement in READ COMMITTED, so it reads what committed before it."""
    held: dict[int, list[Broadcast]] = {}
    for intent in intents:
        if intent.broadcast is not None:  # one instance per row of the batch
            held.setdefault(intent.broadcast.pk, []).append(intent.broadcast)
    if not held:
        return
    table = connection.ops.quote_name(Broadcast._meta.db_table)
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT id, state FROM {table} WHERE id = ANY(%s) ORDER BY id FOR SHARE",  # noqa: S608
            [sorted(held)],
        )
        for broadcast_id, state in cursor.fetchall():
            for broadcast in held[broadcast_id]:
                broadcast.state = state


def reread_stops(intents: Sequence[SendIntent]) -> None:
    """Read the batch's tenant status and second approver rule, and mailbox status and recipient
    policy, again, in a statement of their own.

    ``lock_leased`` reads them in its statement's snapshot, which is taken before the statement
    waits for a row lock. A change that stops sends (``intents.sending.stops``) holds the intents
    it affects until it commits: a check that waited for it got its rows after that commit, with
    the status (or the policy) from before it, and sent. This statement starts after
    the wait (READ COMMITTED), so it reads what committed before it; the memberships and rights
    are read after the wait too (``CheckFacts.load``). A plain read: a lock here would be one on
    the hottest rows of all."""
    if not intents:
        return
    mailbox_table = connection.ops.quote_name(Mailbox._meta.db_table)
    tenant_table = connection.ops.quote_name(Tenant._meta.db_table)
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT 'm', id, status, policy_mode, allowed_domains, allowed_addresses, "  # noqa: S608
            f"NULL::boolean FROM {mailbox_table} WHERE id = ANY(%s) UNION ALL "
            f"SELECT 't', id, status, NULL, NULL, NULL, second_approver_on_edit "
            f"FROM {tenant_table} WHERE id = ANY(%s)",
            [sorted({i.mailbox_id for i in intents}), sorted({i.tenant_id for i in intents})],
        )
        rows = {(kind, pk): rest for kind, pk, *rest in cursor.fetchall()}
    for intent in intents:
        mailbox = intent.mailbox
        if ("m", intent.mailbox_id) in rows:
            status, mode, domains, addresses, _ = rows["m", intent.mailbox_id]
            mailbox.status, mailbox.policy_mode = status, mode
            # Replaced only when changed: a new list rebuilds the allow-sets the instance keeps
            # (Mailbox._allowed_sets).
            if mailbox.allowed_domains != domains:
                mailbox.allowed_domains = domains
            if mailbox.allowed_addresses != addresses:
                mailbox.allowed_addresses = addresses
        if ("t", intent.tenant_id) in rows:
            tenant_row = rows["t", intent.tenant_id]
            intent.tenant.status = tenant_row[0]
            intent.tenant.second_approver_on_edit = tenant_row[4]
