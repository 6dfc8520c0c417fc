"""The tenant's suppression list as its admins change it: a manual add, a removal, each with
the person's reason and an audit row in the same transaction.

These write intents' ``Suppression`` table directly, as tenants/services.py did before the move;
the one suppression service in intents is being written at the same time, and these two become
calls to it (the audit row stays here, with the administrative action).
"""

from __future__ import annotations

from django.core.exceptions import ValidationError
from django.core.validators import validate_email
from django.db import transaction

from intents.models import Suppression
from tenants.models import Tenant, User
from tenants.services import AdminError, audit_record


def suppression_add(*, tenant: Tenant, address: str, note: str, actor: User):
    address = (address or "").strip().lower()
    try:
        validate_email(address)
    except ValidationError:
        raise AdminError("invalid_email", "Enter a valid email address.", "address") from None
    note = (note or "").strip()
    if not note:
        raise AdminError("reason_required", "Say why this address is suppressed.", "note")
    with transaction.atomic():
        suppression, created = Suppression.objects.get_or_create(
            tenant=tenant,
            address=address,
            defaults={
                "reason": Suppression.Reason.MANUAL,
                "source": f"person:{actor.pk}",
                "note": note,
                "created_by": actor,
            },
        )
        if not created:
            raise AdminError(
                "already_suppressed",
                f"{address} is already suppressed ({suppression.get_reason_display()}).",
                "address",
            )
        audit_record(
            tenant=tenant,
            actor=actor,
            action="suppression.added",
            obj=suppression,
            data={"address": address, "note": note},
        )
    return suppression


def suppression_remove(*, tenant: Tenant, suppression_id: int, reason: str, actor: User) -> None:
    reason = (reason or "").strip()
    if not reason:
        raise AdminError(
            "reason_required", "Say why this address may receive mail again.", "reason"
        )
    with transaction.atomic():
        suppression = (
            Suppression.objects.select_for_update().filter(tenant=tenant, pk=suppression_id).first()
        )
        if suppression is None:
            raise AdminError("not_found", "That address is no longer suppressed.")
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
        suppression.delete()
