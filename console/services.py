"""The tenant's suppression list as its admins change it: a manual add, a removal, each with
the person's reason and an audit row in the same transaction.

The rows are written by intents' one suppression service; the person's reason, the validation
and the audit row stay here, with the administrative action.
"""

from __future__ import annotations

from django.db import transaction
from django.utils.translation import gettext as _

from common.addresses import stray_character_refusal
from common.text import unsafe_in_name
from console.selectors import suppression_reason
from intents.policy import normalize_address
from intents.services import suppressions
from tenants.models import Tenant, User
from tenants.send_stops import Stopped, sends_in_flight_hold
from tenants.services import AdminError, audit_record, require_admin, require_tenant_open


def suppression_add(*, tenant: Tenant, address: str, note: str, actor: User) -> Stopped:
    # The form every send compares against (intents.policy.normalize_address): stored as typed,
    # ana@xn--bcher-kva.de never matched the ana@bücher.de a draft to that person is checked as.
    # Named, not stripped (common.addresses.stray_character_refusal); the refusal of
    # normalize_address names the character at fault too.
    if refusal := stray_character_refusal(address or "", field=_("Address")):
        raise AdminError("invalid_email", refusal, "address")
    try:
        address = normalize_address(address or "")
    except ValueError as exc:
        raise AdminError("invalid_email", str(exc), "address") from None
    note = (note or "").strip()
    if not note:
        raise AdminError("reason_required", _("Say why this address is suppressed."), "note")
    _refuse_unsafe(note, "note")
    with transaction.atomic():
        require_admin(tenant, actor, open_checked_after_sends=True)
        # The sends to this address already past their pre-call check go out; the hold makes
        # every later check wait for this commit and read the new entry (tenants.send_stops).
        in_flight = sends_in_flight_hold(tenant_id=tenant.pk, address=address)
        require_tenant_open(tenant)
        suppression, created = suppressions.suppression_add(
            tenant=tenant, address=address, note=note, actor=actor
        )
        if not created:
            raise AdminError(
                "already_suppressed",
                _("%(address)s is already suppressed (%(reason)s).")
                % {"address": address, "reason": suppression_reason(suppression.reason)},
                "address",
            )
        audit_record(
            tenant=tenant,
            actor=actor,
            action="suppression.added",
            obj=suppression,
            data={"address": address, "note": note, "sends_in_flight": in_flight},
        )
    return Stopped(suppression, in_flight)


def suppression_remove(*, tenant: Tenant, suppression_id: int, reason: str, actor: User) -> None:
    reason = (reason or "").strip()
    if not reason:
        raise AdminError(
            "reason_required", _("Say why this address may receive mail again."), "reason"
        )
    _refuse_unsafe(reason, "reason")
    with transaction.atomic():
        require_admin(tenant, actor)
        suppression = suppressions.suppression_remove(tenant=tenant, suppression_id=suppression_id)
        if suppression is None:
            raise AdminError("not_found", _("That address is no longer suppressed."))
        audit_record(
            tenant=tenant,
            actor=actor,
            action="suppression.removed",
            obj=suppression,
            data={
                "address": suppression.address,
                "was": suppression.reason,
                "reason": reason,
            },
        )


def _refuse_unsafe(reason: str, field: str) -> None:
    """Refuse a reason (one line: the page's box holds one) that holds what ``unsafe_in_name``
    names: every admin reads it in the audit log, where a bidirectional control shows the rest
    of the line reversed, as a suspension's reason is refused (tenants.onboarding)."""
    if found := unsafe_in_name(reason):
        raise AdminError(
            "invalid_reason",
            _("A reason cannot hold the control character %(character)s.") % {"character": found},
            field,
        )
