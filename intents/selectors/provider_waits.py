"""Why sends wait on the provider rather than on a worker, across all tenants: for operators only
(``manage.py intents_status``). A mailbox whose key AgentMail refused holds its sends until an
admin checks the key again (mailboxes.key_health); a key whose circuit is open or probing holds
them until a probe answers, and a 429's Retry-After empties its bucket until then
(intents.sending.throttle). Neither is counted in the oldest queued
age, so without these lines the command read as on a quiet day."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from django.db.models import Count, Q
from django.db.models.functions import Now

from intents.models import ProviderThrottle, SendIntent
from mailboxes.models import Mailbox

_WAITING = Q(intents__state__in=[SendIntent.State.QUEUED, SendIntent.State.UNCERTAIN])


@dataclass(frozen=True)
class RefusedKey:
    tenant: str
    address: str
    since: datetime
    waiting: int


@dataclass(frozen=True)
class OpenCircuit:
    key_ref: str
    state: str
    until: datetime | None
    # The mailboxes that send with the key (tenant slug, address); none for a key no mailbox
    # holds any more.
    mailboxes: list[tuple[str, str]]


@dataclass(frozen=True)
class RateLimited:
    key_ref: str
    until: datetime
    mailboxes: list[tuple[str, str]]


def refused_keys() -> list[RefusedKey]:
    rows = (
        Mailbox.objects.filter(key_refused_at__isnull=False)
        .annotate(waiting=Count("intents", filter=_WAITING))
        .order_by("tenant__slug", "address")
        .values_list("tenant__slug", "address", "key_refused_at", "waiting")
    )
    return [
        RefusedKey(tenant=slug, address=address, since=since, waiting=waiting)
        for slug, address, since, waiting in rows
        if since is not None
    ]


def open_circuits(*, tenant=None) -> list[OpenCircuit]:
    """Keys whose circuit is open or probing, with the mailboxes that send with them; with
    ``tenant``, only the keys of its mailboxes, naming only those (the health panel)."""
    throttles = list(
        ProviderThrottle.objects.exclude(circuit=ProviderThrottle.Circuit.CLOSED)
        .order_by("key_ref")
        .values_list("key_ref", "circuit", "opened_until")
    )
    holders = _holders({ref for ref, _, _ in throttles}, tenant)
    return [
        OpenCircuit(ref, state, until, holders.get(ref, []))
        for ref, state, until in throttles
        if tenant is None or ref in holders
    ]


def rate_limited(*, tenant=None) -> list[RateLimited]:
    """Keys AgentMail answered 429 for whose Retry-After has not passed (the throttle holds their
    bucket empty until then), with the mailboxes that send with them."""
    throttles = list(
        ProviderThrottle.objects.filter(refilled_at__gt=Now())
        .exclude(key_ref__startswith="broadcast:")
        .order_by("key_ref")
        .values_list("key_ref", "refilled_at")
    )
    holders = _holders({ref for ref, _ in throttles}, tenant)
    return [
        RateLimited(ref, until, holders.get(ref, []))
        for ref, until in throttles
        if tenant is None or ref in holders
    ]


def _holders(refs: set[str], tenant) -> dict[str, list[tuple[str, str]]]:
    """(tenant slug, address) of the mailboxes sending with each throttle key; one query."""
    if not refs:
        return {}
    key_ids = {ref.removeprefix("key:") for ref in refs if ref.startswith("key:")}
    mailbox_ids = {
        int(ref.removeprefix("mailbox:"))
        for ref in refs
        if ref.startswith("mailbox:") and ref.removeprefix("mailbox:").isdigit()
    }
    mailboxes = Mailbox.objects.filter(Q(provider_api_key_id__in=key_ids) | Q(pk__in=mailbox_ids))
    if tenant is not None:
        mailboxes = mailboxes.filter(tenant=tenant)
    holders: dict[str, list[tuple[str, str]]] = {}
    for pk, key_id, slug, address in mailboxes.order_by("tenant__slug", "address").values_list(
        "pk", "provider_api_key_id", "tenant__slug", "address"
    ):
        # The throttle's own rule (intents.sending.throttle.key_ref_for).
        ref = f"key:{key_id}" if key_id else f"mailbox:{pk}"
        if ref in refs:
            holders.setdefault(ref, []).append((slug, address))
    return holders
