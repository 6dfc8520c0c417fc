"""The operators' writes on whole tenants: onboarding one, inviting an admin to it, suspending and
resuming it, giving it its own attachment storage quota (the commands ``tenant_create``,
``tenant_invite_admin``, ``tenant_suspend``, ``tenant_resume``, ``tenant_storage_quota``, and the
actions of the operators' Django admin).

An operator is nobody in a tenant: the tenant's first admin joins by an invitation like any
member (``invitations.invitation_create_by_operator``), and every change here leaves an audit row
that the tenant's admins read on their audit page. As in tenants.services, each function is one
transaction, guarded by the row it changes.
"""

from __future__ import annotations

import logging
import re

from django.conf import settings
from django.db import IntegrityError, transaction
from django.urls import reverse
from django.utils.translation import gettext as _

from common.cli import shown
from common.text import unsafe_in_name
from tenants import invitations
from tenants.models import AuditEvent, Membership, Tenant, User
from tenants.send_stops import Stopped, sends_in_flight_hold
from tenants.services import AdminError, audit_record
from tenants.signin_audit import signin_audit

logger = logging.getLogger(__name__)

SLUG_MAX = Tenant._meta.get_field("slug").max_length or 60
NAME_MAX = Tenant._meta.get_field("name").max_length or 120
REASON_MAX = 500
# A tenant's own attachment storage quota lies where TENANT_ATTACHMENT_STORAGE_BYTES must
# (config.settings): at least one draft's files, at most 1 PiB.
STORAGE_QUOTA_MOST = 1024**5
# What /t/<slug>/ accepts (Django's slug converter), lower case only: slugs are compared as
# typed, and "Acme" beside "acme" would be two tenants that read as one.
SLUG_CHARACTER = re.compile(r"[a-z0-9_-]")


def tenant_slug_checked(slug: str) -> str:
    """The slug as typed, or the refusal naming what is wrong with it."""
    slug = (slug or "").strip()
    if not slug:
        raise AdminError(
            "invalid_slug", _("A tenant needs a slug (its address /t/<slug>/)."), "slug"
        )
    if len(slug) > SLUG_MAX:
        raise AdminError(
            "invalid_slug",
            _("A slug is at most %(most)d characters long; this one has %(count)d.")
            % {"most": SLUG_MAX, "count": len(slug)},
            "slug",
        )
    wrong = next((char for char in slug if not SLUG_CHARACTER.fullmatch(char)), None)
    if wrong is not None:
        shown = f"U+{ord(wrong):04X}" if not wrong.isprintable() or wrong.isspace() else wrong
        raise AdminError(
            "invalid_slug",
            _(
                "A slug holds only lower-case letters a-z, digits, hyphens and underscores; "
                "it cannot hold %(character)s."
            )
            % {"character": shown},
            "slug",
        )
    if not (slug[0].isalnum() and slug[-1].isalnum()):
        raise AdminError(
            "invalid_slug", _("A slug starts and ends with a letter or a digit."), "slug"
        )
    return slug


def tenant_name_checked(name: str) -> str:
    """The tenant's name, trimmed; refused when empty, too long, or holding what
    ``unsafe_in_name`` names (every member reads it: the tenant switcher, invitations)."""
    name = (name or "").strip()
    if not name:
        raise AdminError("invalid_name", _("A tenant needs a name."), "name")
    if len(name) > NAME_MAX:
        raise AdminError(
            "invalid_name",
            _("A tenant's name is at most %(most)d characters long; this one has %(count)d.")
            % {"most": NAME_MAX, "count": len(name)},
            "name",
        )
    if unsafe := unsafe_in_name(name):
        raise AdminError(
            "invalid_name",
            _("A name cannot hold the control character %(character)s.") % {"character": unsafe},
            "name",
        )
    return name


def suspension_reason_checked(reason: str) -> str:
    """The reason given for a suspension, trimmed: the tenant's admins read it in their audit
    log, so it is required, one line of plain text, at most ``REASON_MAX`` characters, with no
    bidirectional control (``unsafe_in_name``: the rest of the line would read reversed)."""
    reason = (reason or "").strip()
    if not reason:
        raise AdminError("invalid_reason", _("Say why the tenant is suspended."), "reason")
    if len(reason) > REASON_MAX:
        raise AdminError(
            "invalid_reason",
            _("A reason is at most %(most)d characters long; this one has %(count)d.")
            % {"most": REASON_MAX, "count": len(reason)},
            "reason",
        )
    if found := unsafe_in_name(reason):
        raise AdminError(
            "invalid_reason",
            _("A reason cannot hold the control character %(character)s.") % {"character": found},
            "reason",
        )
    return reason


def storage_quota_parsed(value: str) -> int:
    """An attachment storage quota as an operator typed it: a whole number of bytes, then
    ``storage_quota_checked``."""
    typed = (value or "").strip()
    digits = typed.removeprefix("-")
    # Only ASCII digits: int() also takes "1_000", "٣" and "+5", which nobody types as a quota.
    if not (digits.isascii() and digits.isdigit()):
        raise AdminError(
            "invalid_quota",
            _(
                "A quota is a whole number of bytes, such as 21474836480 for 20 GiB; "
                "%(value)s is not."
            )
            % {"value": shown(typed)},
            "bytes",
        )
    # int() refuses more than 4,300 digits (a ValueError: the command's traceback), and a
    # number with more digits than 1 PiB is past the bounds anyway.
    if len(digits.lstrip("0")) > len(str(STORAGE_QUOTA_MOST)):
        raise AdminError(
            "invalid_quota",
            _("A quota is at most %(most)d bytes (1 PiB); a number of %(digits)d digits is not.")
            % {"most": STORAGE_QUOTA_MOST, "digits": len(digits.lstrip("0"))},
            "bytes",
        )
    return storage_quota_checked(int(typed))


def storage_quota_checked(quota: int) -> int:
    """A tenant's own attachment storage quota within the bounds of
    ``TENANT_ATTACHMENT_STORAGE_BYTES``: below one draft's files (``ATTACHMENT_MAX_DRAFT_BYTES``)
    it is refused as the start refuses the setting, since no draft could store its files and it
    is most likely a unit slip (20 meant as GiB)."""
    least = int(settings.ATTACHMENT_MAX_DRAFT_BYTES)
    if not least <= quota <= STORAGE_QUOTA_MOST:
        raise AdminError(
            "invalid_quota",
            _(
                "A quota is from %(least)d bytes (one draft's files, ATTACHMENT_MAX_DRAFT_BYTES) "
                "to %(most)d bytes (1 PiB); %(value)d is not."
            )
            % {"least": least, "most": STORAGE_QUOTA_MOST, "value": quota},
            "bytes",
        )
    return quota


def invitation_url(token: str) -> str:
    """The invitation link for a secret, on the deployment's public address (a command has no
    request to take the host from, as the console's members page does)."""
    return settings.PUBLIC_BASE_URL.rstrip("/") + reverse("invitation_open", args=[token])


def _slug_taken(slug: str) -> AdminError:
    return AdminError(
        "slug_taken", _("The slug %(slug)s is taken by another tenant.") % {"slug": slug}, "slug"
    )


def tenant_create(
    *, name: str, slug: str, admin_email: str, admin_name: str = ""
) -> tuple[Tenant, str]:
    """A new, active tenant and the plaintext secret of its first admin's invitation link (shown
    once; only its digest is stored). Nothing is written when anything is refused."""
    name = tenant_name_checked(name)
    slug = tenant_slug_checked(slug)
    with transaction.atomic():
        # Slugs made before this check (the Django admin took any case) may differ in case only.
        if Tenant.objects.filter(slug__iexact=slug).exists():
            raise _slug_taken(slug)
        try:
            with transaction.atomic():
                tenant = Tenant.objects.create(name=name, slug=slug)
        except IntegrityError:
            raise _slug_taken(slug) from None
        audit_record(
            tenant=tenant,
            actor=None,
            action="tenant.created",
            obj=tenant,
            data={"name": name, "slug": slug},
        )
        _invitation, token = invitations.invitation_create_by_operator(
            tenant=tenant, email=admin_email, full_name=admin_name
        )
    logger.info("tenants.tenant.created", extra={"tenant_id": tenant.pk})
    return tenant, token


def _locked(slug: str) -> Tenant:
    """The tenant of ``slug``, its row locked in the caller's transaction."""
    tenant = Tenant.objects.select_for_update().filter(slug=slug).first()
    if tenant is None:
        # Quoted and cut short: an empty slug read "No tenant has the slug .", and one of
        # 100,000 characters was a refusal as long.
        raise AdminError("not_found", _("No tenant has the slug %(slug)s.") % {"slug": shown(slug)})
    return tenant


def tenant_invite_admin(*, slug: str, admin_email: str, admin_name: str = "") -> tuple[Tenant, str]:
    """An operator's invitation of an admin to an existing tenant (its first admin's link expired,
    or no admin is left) and the plaintext of its link's secret. A pending invitation to the same
    address in the tenant is replaced; a member's address is refused."""
    with transaction.atomic():
        tenant = _locked(slug)
        if not tenant.is_active:
            raise AdminError(
                "suspended",
                _("%(tenant)s is suspended; it takes no new members. Resume it first.")
                % {"tenant": tenant.name},
            )
        _invitation, token = invitations.invitation_create_by_operator(
            tenant=tenant, email=admin_email, full_name=admin_name
        )
    return tenant, token


def _change_status(
    *,
    slug: str,
    source: str,
    target: str,
    action: str,
    data: dict,
    actor: User | None,
    refused: str,
    stops_sends: bool = False,
) -> Stopped[Tenant]:
    """Move the tenant from ``source`` to ``target`` under its row lock, audited as ``action``;
    refused with the message ``refused``, changing nothing, when it is not in ``source``.
    ``stops_sends``: first hold the tenant's sends on their way to a call (before the tenant's
    row: see ``tenants.send_stops``), and audit how many were in flight."""
    with transaction.atomic():
        if stops_sends:
            tenant_id = Tenant.objects.filter(slug=slug).values_list("pk", flat=True).first()
            if tenant_id is not None:
                data = {**data, "sends_in_flight": sends_in_flight_hold(tenant_id=tenant_id)}
        tenant = _locked(slug)
        if tenant.status != source:
            raise AdminError(f"already_{target}", refused)
        Tenant.objects.filter(pk=tenant.pk, status=source).update(status=target)
        tenant.status = target
        audit_record(tenant=tenant, actor=actor, action=action, obj=tenant, data=data)
    logger.info(f"tenants.{action}", extra={"tenant_id": tenant.pk})
    return Stopped(tenant, data.get("sends_in_flight", 0))


def tenant_suspend(*, slug: str, reason: str, actor: User | None = None) -> Stopped[Tenant]:
    """Suspend an active tenant: read-only for its members, refused to its agents, and its
    queued sends blocked before any provider call (README "A suspended tenant is read-only").
    ``actor``: the operator signed in to the Django admin; None from a command."""
    reason = suspension_reason_checked(reason)
    return _change_status(
        slug=slug,
        source=Tenant.Status.ACTIVE,
        target=Tenant.Status.SUSPENDED,
        action="tenant.suspended",
        data={"reason": reason},
        actor=actor,
        refused=_("The tenant %(slug)s is already suspended; nothing was changed.")
        % {"slug": slug},
        stops_sends=True,
    )


def tenant_resume(*, slug: str, actor: User | None = None) -> Tenant:
    """Make a suspended tenant active again. Sends that a worker blocked while it was suspended
    stay blocked (a final state)."""
    return _change_status(
        slug=slug,
        source=Tenant.Status.SUSPENDED,
        target=Tenant.Status.ACTIVE,
        action="tenant.resumed",
        data={},
        actor=actor,
        refused=_("The tenant %(slug)s is not suspended; nothing was changed.") % {"slug": slug},
    ).changed


def _storage_quota_data(tenant: Tenant) -> dict:
    return {
        "attachment_storage_quota": tenant.attachment_storage_quota,
        "own_quota": tenant.attachment_storage_quota_bytes is not None,
    }


def tenant_storage_quota_set(
    *, slug: str, quota_bytes: int | None, actor: User | None = None
) -> Tenant:
    """Give the tenant its own attachment storage quota (``quota_bytes``, checked by
    ``storage_quota_checked``), or back the deployment's (None). The audit row keeps the
    effective quota before and after, and whether it was the tenant's own, so it reads true
    after the deployment's figure changes. A quota below what the tenant holds deletes nothing:
    its new files are refused until retention frees room. A suspended tenant may be given one
    (it applies once it is resumed). Refused, changing nothing, when it is what the tenant has."""
    if quota_bytes is not None:
        quota_bytes = storage_quota_checked(quota_bytes)
    with transaction.atomic():
        tenant = _locked(slug)
        if tenant.attachment_storage_quota_bytes == quota_bytes:
            raise AdminError(
                "unchanged",
                _("The tenant %(slug)s has this quota already; nothing was changed.")
                % {"slug": slug},
            )
        before = _storage_quota_data(tenant)
        Tenant.objects.filter(pk=tenant.pk).update(attachment_storage_quota_bytes=quota_bytes)
        tenant.attachment_storage_quota_bytes = quota_bytes
        audit_record(
            tenant=tenant,
            actor=actor,
            action="tenant.storage_quota_changed",
            obj=tenant,
            data={"before": before, "after": _storage_quota_data(tenant)},
        )
    logger.info(
        "tenants.tenant.storage_quota_changed",
        extra={"tenant_id": tenant.pk, "quota": tenant.attachment_storage_quota},
    )
    return tenant


def account_changed_by_operator(
    *,
    user: User,
    actor: User | None,
    before: dict,
    after: dict,
    request=None,
    sends_in_flight: int | None = None,
    sessions_ended: int | None = None,
) -> None:
    """The audit rows of an operator's edit of an account in the operators' admin (its address,
    name, whether it may sign in, its operator rights), in the transaction that saved it: one in
    each tenant of the person. An address changed there changes the name every earlier row of
    theirs is shown under, so the old one is kept here. ``sends_in_flight``: when the account was
    switched off, the sends it had approved that were already past their last check;
    ``sessions_ended``: how many of its sessions that ended."""
    data: dict = {"before": before, "after": after}
    if sends_in_flight is not None:
        data["sends_in_flight"] = sends_in_flight
    if sessions_ended is not None:
        data["sessions_ended"] = sessions_ended
    signin_audit(
        action="user.changed_by_operator",
        user=user,
        actor=actor,
        request=request,
        data=data,
    )
    logger.info(
        "tenants.user.changed_by_operator", extra={"user_id": user.pk, "fields": sorted(after)}
    )


def tenants_left_without_admin(*, user: User, lock: bool = False) -> list[Tenant]:
    """The tenants, by name, of which ``user`` is the only active admin whose account is enabled:
    those that switching the account off leaves with nobody to manage them. ``lock``, inside the
    switch-off's transaction: every active admin membership of those tenants is locked first, in
    id order as ``tenants.services.lock_member_change`` locks them, so a member's deactivation
    or another operator's switch-off of the other admin waits for this one or is seen by it. The
    accounts are read after the lock, in a statement of their own: one switched off by a change
    the lock waited for is read as it is now, not as the locking statement's snapshot had it."""
    theirs = Membership.objects.filter(user=user, role=Membership.Role.ADMIN, is_active=True)
    admins = Membership.objects.filter(
        tenant_id__in=theirs.values("tenant_id"), role=Membership.Role.ADMIN, is_active=True
    ).order_by("pk")
    if lock:
        admins = admins.select_for_update()
    rows = list(admins.values_list("tenant_id", "user_id"))
    others = {u for _t, u in rows if u != user.pk}
    enabled = set(User.objects.filter(pk__in=others, is_active=True).values_list("pk", flat=True))
    alone = {t for t, u in rows if u == user.pk} - {t for t, u in rows if u in enabled}
    return list(Tenant.objects.filter(pk__in=alone).order_by("name", "pk"))


def tenants_left_without_admin_record(
    *, user: User, tenants: list[Tenant], actor: User | None
) -> None:
    """The audit row, in each tenant of ``tenants``, of an operator's switch-off of ``user``, its
    last active admin (``tenants_left_without_admin``), in the switch-off's transaction: the
    operators' admin lets it through once the operator says so (see ``tenants.admin``), and
    the tenant has no admin until an operator invites one."""
    for tenant in tenants:
        audit_record(
            tenant=tenant,
            actor=actor,
            action="tenant.left_without_admin",
            obj=Membership.objects.get(tenant=tenant, user=user),
            data={"email": user.email},
        )
    if tenants:
        logger.warning(
            "tenants.tenant.left_without_admin",
            extra={"user_id": user.pk, "tenant_ids": [t.pk for t in tenants]},
        )


def operator_account_created(*, user: User, actor: User | None = None) -> None:
    """The audit row of an account an operator made (no tenant: it belongs to none yet):
    ``manage.py createsuperuser``'s operator account (``actor`` None), or an account added in
    the operators' admin with a password the operator chose (``actor`` that operator), in the
    transaction that saved it."""
    action = "user.created_as_operator" if actor is None else "user.created_by_operator"
    data: dict[str, object] = {"email": user.email}
    if actor is None:
        data["is_superuser"] = user.is_superuser
    AuditEvent.objects.create(
        tenant=None,
        actor=actor,
        action=action,
        object_type="user",
        object_id=str(user.pk),
        data=data,
    )
    logger.info(f"tenants.{action}", extra={"user_id": user.pk})


def operator_storage_recounted(*, tenant_id: int, before: int, after: int) -> None:
    """The audit row of ``manage.py attachment_storage_recount`` correcting a tenant's
    attachment storage total (bytes ``before`` and ``after``), in the recount's transaction.
    Written only when the total changed: a run that finds it right leaves no row. The recount
    logs it (``intents.attachment.storage_recounted``)."""
    _storage_recounted("tenant.storage_recounted", tenant_id, "tenant", tenant_id, before, after)


def operator_mailbox_storage_recounted(
    *, tenant_id: int, mailbox_id: int, before: int, after: int
) -> None:
    """The audit row of ``manage.py attachment_storage_recount`` correcting one mailbox's
    attachment storage total (its share's use), in the recount's transaction; only when it
    changed."""
    _storage_recounted("mailbox.storage_recounted", tenant_id, "mailbox", mailbox_id, before, after)


def _storage_recounted(
    action: str, tenant_id: int, object_type: str, object_id: int, before: int, after: int
) -> None:
    AuditEvent.objects.create(
        tenant_id=tenant_id,
        actor=None,
        action=action,
        object_type=object_type,
        object_id=str(object_id),
        data={
            "before": {"attachment_storage_used": before},
            "after": {"attachment_storage_used": after},
        },
    )


def operator_secrets_resealed(*, key_id: str, counts: dict[str, int]) -> None:
    """The audit row of ``manage.py reencrypt_secrets`` (no tenant: it re-seals every tenant's
    secrets), in its transaction: the key they are sealed under now and how many of each kind
    changed. Written only when something changed."""
    AuditEvent.objects.create(
        tenant=None,
        actor=None,
        action="secrets.resealed",
        object_type="encryption_key",
        object_id=key_id,
        data=counts,
    )
    # The counts as one field: the formatter hides a field named like a secret
    # ("webhook_secrets"), and a count is none.
    logger.info("tenants.secrets.resealed", extra={"key_id": key_id, "resealed": counts})
