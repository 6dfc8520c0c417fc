"""The suppression list (``Suppression``): this module is its only writer.

Three sources feed it: a person (the admin console adds and removes entries by hand), the
provider's bounce, complaint and rejection webhooks, and the worker when AgentMail refuses a send
as ``message_rejected`` (DESIGN.md). Automatic entries follow one total order of reasons, so the
final reason does not depend on arrival order, and never overwrite a person's entry.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from django.db import connection

from intents.models import Suppression
from intents.policy import normalize_address

# complained > bounced > rejected; a manual entry is never overwritten (see suppressions_record).
REASON_RANK = {
    Suppression.Reason.REJECTED: 1,
    Suppression.Reason.BOUNCED: 2,
    Suppression.Reason.COMPLAINED: 3,
}


def _rank_sql(column: str) -> str:
    cases = " ".join(f"WHEN '{reason}' THEN {rank}" for reason, rank in REASON_RANK.items())
    return f"(CASE {column} {cases} ELSE 0 END)"


@dataclass(frozen=True)
class Suppressing:
    """One writer's automatic suppressions, as ``suppressions_record`` takes them."""

    tenant_id: int
    addresses: Sequence[str]
    reason: str
    source: str
    note: str = ""


def suppressions_record(
    *, tenant_id: int, addresses: Iterable[str], reason: str, source: str, note: str = ""
) -> list[str]:
    """Add or strengthen automatic suppressions in one statement; returns the addresses whose
    row changed (in the order given).

    Addresses are stored in the form every send is checked in (``normalize_address``), whatever
    form the caller holds: a send approved before that form changed (its domain in Unicode, now
    in punycode) bounced into a row no later draft to the same person matched. An address that
    has no normal form is kept lower-cased. A row only changes to a higher-ranked reason and
    never from ``manual``; with ``rejected`` (the lowest) an existing row is therefore never
    changed, as an ``INSERT ... ON CONFLICT DO NOTHING`` would. The rows are written in
    (tenant, address) order, whatever the order given (``suppressions_record_many`` says why).
    """
    write = Suppressing(tenant_id, list(addresses), reason, source, note)
    return suppressions_record_many([write])[0]


def suppressions_record_many(writes: Sequence[Suppressing]) -> list[list[str]]:
    """Several writers' suppressions in one transaction (a webhook batch's events, in event
    order), each written as ``suppressions_record`` writes it, as if they came one after the
    other; returns, for each, the addresses whose row it changed (in its order).

    The rows are locked in one order, (tenant, stored address), whoever writes them. The upsert
    locks each row it names (ON CONFLICT DO UPDATE locks a row even when its WHERE is false; a
    new row holds its key until commit) in the order of its rows: a bounce listing B before A,
    written while the worker recorded a refusal of a send to A and B, held B and waited for A
    while the worker held A and waited for B, and PostgreSQL cancelled one of them. So the rows
    of a statement are sorted, and the writes go in rounds: the first names each row once, for
    its first writer; round k names only the rows with a k-th writer, which the first round
    locked already. Each row still sees its writers in their order (a complaint after a bounce
    strengthens it, a second bounce does not).
    """
    forms: list[list[str]] = []
    rounds: list[dict[tuple[int, str], int]] = []
    seen: dict[tuple[int, str], int] = {}
    for i, write in enumerate(writes):
        # Once each: two forms of one address in one statement would make ON CONFLICT update the
        # same row twice, which PostgreSQL refuses.
        addresses = list(dict.fromkeys(_stored_form(a) for a in write.addresses))
        forms.append(addresses)
        for address in addresses:
            key = (write.tenant_id, address)
            k = seen[key] = seen.get(key, -1) + 1
            if k == len(rounds):
                rounds.append({})
            rounds[k][key] = i
    changed: list[set[str]] = [set() for _ in writes]
    for writers in rounds:
        rows = [(key, writes[i]) for key, i in sorted(writers.items())]
        for key in _upsert(rows):
            changed[writers[key]].add(key[1])
    return [
        [a for a in addresses if a in done] for addresses, done in zip(forms, changed, strict=True)
    ]


def _upsert(rows: list[tuple[tuple[int, str], Suppressing]]) -> set[tuple[int, str]]:
    """Insert or strengthen ``rows`` (each (tenant id, stored address) once), in their order, in
    one statement whose text does not depend on their number; returns the keys of the rows that
    changed."""
    with connection.cursor() as cursor:
        cursor.execute(
            f"INSERT INTO {Suppression._meta.db_table} AS s (tenant_id, address, reason, source, "  # noqa: S608
            "note, created_at) SELECT u.t, u.a, u.r, u.s, u.n, now() FROM unnest(%s::bigint[], "
            "%s::text[], %s::text[], %s::text[], %s::text[]) WITH ORDINALITY AS u(t, a, r, s, n, o) "
            "ORDER BY u.o ON CONFLICT (tenant_id, address) DO UPDATE SET "
            "reason = EXCLUDED.reason, source = EXCLUDED.source, note = EXCLUDED.note "
            f"WHERE s.reason <> %s AND {_rank_sql('s.reason')} < {_rank_sql('EXCLUDED.reason')} "
            "RETURNING s.tenant_id, s.address",
            [
                [tenant_id for (tenant_id, _), _ in rows],
                [address for (_, address), _ in rows],
                [write.reason for _, write in rows],
                [write.source[:100] for _, write in rows],
                [write.note for _, write in rows],
                Suppression.Reason.MANUAL,
            ],
        )
        return {(tenant_id, address) for tenant_id, address in cursor.fetchall()}


def _stored_form(address: str) -> str:
    try:
        return normalize_address(address)
    except ValueError:
        return str(address).strip().lower()


def suppression_add(*, tenant, address: str, note: str, actor) -> tuple[Suppression, bool]:
    """A person's entry for this (normalised) address: (the row, whether it was created). An
    existing entry of any reason is left as it is. Call inside the caller's transaction, which
    also writes the audit row."""
    return Suppression.objects.get_or_create(
        tenant=tenant,
        address=address,
        defaults={
            "reason": Suppression.Reason.MANUAL,
            "source": f"person:{actor.pk}",
            "note": note,
            "created_by": actor,
        },
    )


def suppression_remove(*, tenant, suppression_id) -> Suppression | None:
    """Delete one entry of the tenant, locked first; returns it (its ``pk`` kept, for the audit
    row) or None when there is none. Call inside the caller's transaction."""
    suppression = (
        Suppression.objects.select_for_update().filter(tenant=tenant, pk=suppression_id).first()
    )
    if suppression is None:
        return None
    Suppression.objects.filter(pk=suppression.pk).delete()
    return suppression
