"""The suppression list (``Suppression``): this module is its only writer.

Three sources feed it: a person (the admin console adds and removes entries by hand), the
provider's bounce, complaint and rejection webhooks, and the worker when AgentMail refuses a send
as ``message_rejected`` (DESIGN.md). Automatic entries follow one total order of reasons, so the
final reason does not depend on arrival order, and never overwrite a person's entry.
"""

from __future__ import annotations

from collections.abc import Iterable

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
    changed, as an ``INSERT ... ON CONFLICT DO NOTHING`` would.
    """
    # Once each: two forms of one address in one statement would make ON CONFLICT update the
    # same row twice, which PostgreSQL refuses.
    addresses = list(dict.fromkeys(_stored_form(a) for a in addresses))
    if not addresses:
        return []
    values = ", ".join(["(%s, %s, %s, %s, %s, now())"] * len(addresses))
    params: list = []
    for address in addresses:
        params += [tenant_id, address, reason, source[:100], note]
    with connection.cursor() as cursor:
        cursor.execute(
            f"INSERT INTO {Suppression._meta.db_table} AS s (tenant_id, address, reason, source, "  # noqa: S608
            f"note, created_at) VALUES {values} ON CONFLICT (tenant_id, address) DO UPDATE SET "
            "reason = EXCLUDED.reason, source = EXCLUDED.source, note = EXCLUDED.note "
            f"WHERE s.reason <> %s AND {_rank_sql('s.reason')} < {_rank_sql('EXCLUDED.reason')} "
            "RETURNING address",
            [*params, Suppression.Reason.MANUAL],
        )
        changed = {row[0] for row in cursor.fetchall()}
    return [a for a in addresses if a in changed]


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
