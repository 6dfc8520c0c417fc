"""The rules an admin sets for the whole tenant: review deadline, second approver, retention,
undo window (the policies page), the company's own domains, and the review deadlines and
escalation (the deadlines page).

As in tenants.services: one named action per function, in one transaction, guarded, the actor
re-checked as an admin inside it, an AuditEvent row written in that transaction.
"""

from __future__ import annotations

import re

from django.db import transaction
from django.utils.translation import gettext as _
from django.utils.translation import gettext_lazy

from common.addresses import normalize_domain
from tenants.models import Membership, Tenant, User
from tenants.send_stops import Stopped, sends_in_flight_hold
from tenants.services import AdminError, audit_record, require_admin, tenant_lock_open
from tenants.stale import fingerprint, refuse_if_changed

# The undo window after Approve (Tenant.send_hold_seconds); the database refuses more too.
MAX_SEND_HOLD_SECONDS = 300

POLICY_LABELS = {
    "review_deadline_hours": gettext_lazy("the review deadline"),
    "second_approver_on_edit": gettext_lazy("the second approver rule"),
    "retention_days": gettext_lazy("the retention"),
    "send_hold_seconds": gettext_lazy("the undo window"),
}


def policies_fingerprint(tenant: Tenant) -> str:
    """What a policies form is based on: its ``based_on`` for ``tenant_update_policies``."""
    return fingerprint({f: getattr(tenant, f) for f in POLICY_LABELS})


def _change(
    tenant: Tenant, locked: Tenant, before: dict, after: dict, *, actor, action, data=None
) -> None:
    """Write ``after`` to the (locked) tenant row and both copies in hand, with its audit row
    (``data`` added to it); nothing when nothing changed."""
    if before == after:
        return
    Tenant.objects.filter(pk=tenant.pk).update(**after)
    for name, value in after.items():
        setattr(locked, name, value)
        setattr(tenant, name, value)
    audit_record(
        tenant=tenant,
        actor=actor,
        action=action,
        obj=locked,
        data={"before": before, "after": after, **(data or {})},
    )


def tenant_update_policies(
    *,
    tenant: Tenant,
    review_deadline_hours: int,
    second_approver_on_edit: bool,
    retention_days: int,
    actor: User,
    send_hold_seconds: int | None = None,
    based_on: str | None = None,
) -> Stopped[Tenant]:
    """``based_on``: the fingerprint (``policies_fingerprint``) of the policies the admin's page
    showed; a save based on policies that changed since is refused (StaleSave).

    Turning the second approver rule on stops the queued sends whose approver wrote what they
    approved (the worker's pre-call check asks the rule as it is now): like every change that
    stops sends (``tenants.send_stops``), it first holds the tenant's sends on their way, so a
    check that read the rule just before the save cannot send unseen; the sends already past
    their last check are counted in the audit row and returned."""
    if not 1 <= review_deadline_hours <= 24 * 14:
        raise AdminError(
            "invalid_deadline",
            _("The review deadline must be between 1 and 336 hours (14 days)."),
            "review_deadline_hours",
        )
    if not 1 <= retention_days <= 3650:
        raise AdminError(
            "invalid_retention",
            _("Retention must be between 1 and 3650 days."),
            "retention_days",
        )
    if send_hold_seconds is not None and not 0 <= send_hold_seconds <= MAX_SEND_HOLD_SECONDS:
        raise AdminError(
            "invalid_send_hold",
            _("The undo hold must be between 0 and %(max)d seconds.")
            % {"max": MAX_SEND_HOLD_SECONDS},
            "send_hold_seconds",
        )
    with transaction.atomic():
        require_admin(tenant, actor, open_checked_after_sends=True)
        held: dict = {}
        if second_approver_on_edit and not _second_approver_now(tenant):
            # Before the tenant row: the worker holds sends and then touches it.
            held["sends_in_flight"] = sends_in_flight_hold(tenant_id=tenant.pk)
        locked = tenant_lock_open(tenant)
        before = {f: getattr(locked, f) for f in POLICY_LABELS}
        refuse_if_changed(based_on=based_on, current=before, labels=POLICY_LABELS)
        after = {
            "review_deadline_hours": review_deadline_hours,
            "second_approver_on_edit": second_approver_on_edit,
            "retention_days": retention_days,
            "send_hold_seconds": (
                locked.send_hold_seconds if send_hold_seconds is None else send_hold_seconds
            ),
        }
        _change(
            tenant, locked, before, after, actor=actor, action="tenant.policies_changed", data=held
        )
    return Stopped(locked, held.get("sends_in_flight", 0))


def _second_approver_now(tenant: Tenant) -> bool:
    """The rule as stored now (read before the tenant row is locked; the page's copy may be
    older)."""
    return bool(
        Tenant.objects.filter(pk=tenant.pk)
        .values_list("second_approver_on_edit", flat=True)
        .first()
    )


MAX_OWN_DOMAINS = 50
_DOMAIN_LABEL = re.compile(r"^(?!-)[a-z0-9-]{1,63}(?<!-)$")


def _own_domain(item: str) -> str:
    """A typed domain in the form a recipient's address holds it (its lower-case A-label,
    ``common.addresses.normalize_domain``), which ``review.queries.is_external`` compares it
    with: "B\u00fccher.test" was refused as no domain name and "xn--zz.test", no IDNA, kept to
    match nobody. An ASCII domain IDNA refuses only as special-use (corp.local) is kept as typed,
    as single sign-on's domains are (tenants.oidc_signin.sso_domain); the caller checks it."""
    typed = item.lower().removeprefix("@").rstrip(".")
    try:
        return normalize_domain(typed)
    except ValueError:
        return "" if "xn--" in typed else typed


def own_domains_parse(raw: str) -> list[str]:
    """The domains of a comma-, space- or line-separated list, lower-cased, without duplicates,
    in the order given; raises AdminError naming the first one that is not a domain name."""
    domains: list[str] = []
    for item in re.split(r"[\s,;]+", raw.strip()):
        if not item:
            continue
        domain = _own_domain(item)
        labels = domain.split(".")
        if (
            len(domain) > 253
            or len(labels) < 2
            or not all(_DOMAIN_LABEL.match(label) for label in labels)
        ):
            raise AdminError(
                "invalid_domain",
                _("“%(item)s” is not a domain name (like example.com).") % {"item": item[:80]},
                "own_domains",
            )
        if domain not in domains:
            domains.append(domain)
    if len(domains) > MAX_OWN_DOMAINS:
        raise AdminError(
            "too_many_domains",
            _("At most %(n)d domains.") % {"n": MAX_OWN_DOMAINS},
            "own_domains",
        )
    return domains


OWN_DOMAINS_LABELS = {"own_domains": gettext_lazy("your organisation's domains")}


def own_domains_fingerprint(tenant: Tenant) -> str:
    """What an own-domains form is based on: its ``based_on`` for ``tenant_set_own_domains``."""
    return fingerprint({"own_domains": list(tenant.own_domains)})


def tenant_set_own_domains(
    *, tenant: Tenant, domains: list[str], actor: User, based_on: str | None = None
) -> Tenant:
    """Replace the organisation's own mail domains (already parsed by ``own_domains_parse``).
    ``based_on``: the fingerprint (``own_domains_fingerprint``) of the domains the admin's page
    showed; a save based on domains that changed since is refused (StaleSave)."""
    with transaction.atomic():
        require_admin(tenant, actor, open_checked_after_sends=True)
        locked = tenant_lock_open(tenant)
        before = list(locked.own_domains)
        refuse_if_changed(
            based_on=based_on, current={"own_domains": before}, labels=OWN_DOMAINS_LABELS
        )
        if before == domains:
            return locked
        Tenant.objects.filter(pk=tenant.pk).update(own_domains=domains)
        locked.own_domains = tenant.own_domains = domains
        audit_record(
            tenant=tenant,
            actor=actor,
            action="tenant.policies_changed",
            obj=locked,
            data={"before": {"own_domains": before}, "after": {"own_domains": domains}},
        )
    return locked


ESCALATION_ROLES = (Membership.Role.ADMIN, Membership.Role.APPROVER)
MAX_SLA_MINUTES = 60 * 24 * 14

DEADLINES_LABELS = {
    "sla_minutes": gettext_lazy("the target time to first decision"),
    "sla_warning_minutes": gettext_lazy("the warning window"),
    "escalate_to_id": gettext_lazy("the member to escalate to"),
    "escalate_to_role": gettext_lazy("the role to escalate to"),
}


def deadlines_fingerprint(tenant: Tenant) -> str:
    """What a deadlines form is based on: its ``based_on`` for ``tenant_update_deadlines``."""
    return fingerprint({f: getattr(tenant, f) for f in DEADLINES_LABELS})


def _check_minutes(value: int | None, field: str, message: str) -> None:
    """``message`` is the whole refusal with %(most)d (no sentence is pieced together)."""
    if value is not None and not 1 <= value <= MAX_SLA_MINUTES:
        raise AdminError("invalid_minutes", message % {"most": MAX_SLA_MINUTES}, field)


def _escalation_member(tenant: Tenant, user_id: int | None) -> User | None:
    if user_id is None:
        return None
    membership = (
        Membership.objects.select_related("user").filter(tenant=tenant, user_id=user_id).first()
    )
    if membership is None:
        raise AdminError(
            "not_member", _("That person is not a member of this tenant."), "escalate_to"
        )
    if not membership.is_active or not membership.user.is_active:
        raise AdminError(
            "member_inactive",
            _("%(name)s is not an active member; choose an active one.")
            % {"name": membership.user.display_name},
            "escalate_to",
        )
    if membership.role not in ESCALATION_ROLES:
        raise AdminError(
            "member_cannot_decide",
            _("%(name)s is a viewer and cannot decide drafts; choose an admin or approver.")
            % {"name": membership.user.display_name},
            "escalate_to",
        )
    return membership.user


def tenant_update_deadlines(
    *,
    tenant: Tenant,
    sla_minutes: int | None,
    sla_warning_minutes: int | None,
    escalate_to_id: int | None,
    escalate_to_role: str,
    actor: User,
    based_on: str | None = None,
) -> Tenant:
    """The tenant's deadline target, its warning window and the escalation rule (one member, or
    a role round-robin, or none). ``based_on``: the fingerprint (``deadlines_fingerprint``) of
    the settings the admin's page showed; a save based on settings that changed since is
    refused (StaleSave)."""
    _check_minutes(
        sla_minutes,
        "sla_minutes",
        _("The target must be between 1 and %(most)d minutes (14 days)."),
    )
    _check_minutes(
        sla_warning_minutes,
        "sla_warning_minutes",
        _("The warning window must be between 1 and %(most)d minutes (14 days)."),
    )
    if sla_minutes and sla_warning_minutes and sla_warning_minutes >= sla_minutes:
        raise AdminError(
            "warning_too_long",
            _("The warning window must be shorter than the target."),
            "sla_warning_minutes",
        )
    if escalate_to_role not in ("", *ESCALATION_ROLES):
        raise AdminError("invalid_role", _("Choose admin or approver."), "escalate_to_role")
    if escalate_to_id is not None and escalate_to_role:
        raise AdminError(
            "two_rules",
            _("Escalate to a member or to a role, not both."),
            "escalate_to_role",
        )
    with transaction.atomic():
        require_admin(tenant, actor, open_checked_after_sends=True)
        locked = tenant_lock_open(tenant)
        before = {f: getattr(locked, f) for f in DEADLINES_LABELS}
        refuse_if_changed(based_on=based_on, current=before, labels=DEADLINES_LABELS)
        member = _escalation_member(locked, escalate_to_id)
        after = {
            "sla_minutes": sla_minutes,
            "sla_warning_minutes": sla_warning_minutes,
            "escalate_to_id": member.pk if member else None,
            "escalate_to_role": escalate_to_role,
        }
        _change(tenant, locked, before, after, actor=actor, action="tenant.deadlines_changed")
    return locked
