"""A tenant's sign-in rules, set by its admins: whether two-factor sign-in is required (single
sign-on's settings are in tenants.oidc_config). One transaction each, guarded by the locked tenant
row, with its audit row."""

from __future__ import annotations

from django.db import transaction
from django.utils.translation import gettext as _
from django.utils.translation import gettext_lazy

from common.addresses import account_lookup_form
from common.cli import shown
from tenants import two_factor
from tenants.models import Membership, Tenant, User
from tenants.services import (
    AdminError,
    audit_record,
    belongs_elsewhere,
    lock_member_change,
    require_admin,
    tenant_lock_open,
)
from tenants.stale import fingerprint, refuse_if_changed
from tenants.user_sessions import sessions_end_all

# What the stale-save refusal names (tenants.stale).
TWO_FACTOR_LABELS = {
    "require_two_factor": gettext_lazy("whether members need two-factor sign-in"),
}


def two_factor_fingerprint(tenant: Tenant) -> str:
    """What a two-factor requirement form is based on: its ``based_on`` for
    ``tenant_require_two_factor``."""
    return fingerprint({"require_two_factor": tenant.require_two_factor})


def tenant_require_two_factor(
    *, tenant: Tenant, required: bool, actor: User, based_on: str | None = None
) -> bool:
    """Returns whether anything changed. ``based_on``: the fingerprint
    (``two_factor_fingerprint``) of the requirement the admin's page showed; a save based on one
    that changed since is refused (StaleSave)."""
    with transaction.atomic():
        require_admin(tenant, actor, open_checked_after_sends=True)
        locked = tenant_lock_open(tenant)
        refuse_if_changed(
            based_on=based_on,
            current={"require_two_factor": locked.require_two_factor},
            labels=TWO_FACTOR_LABELS,
        )
        if locked.require_two_factor == required:
            return False
        Tenant.objects.filter(pk=tenant.pk).update(require_two_factor=required)
        tenant.require_two_factor = required
        audit_record(
            tenant=tenant,
            actor=actor,
            action="tenant.two_factor_required" if required else "tenant.two_factor_optional",
            obj=locked,
            data={"required": required},
        )
    return True


def member_reset_two_factor(*, tenant: Tenant, membership_id: int, actor: User) -> Membership:
    """An admin's reset for a member who lost their authenticator: every factor of theirs is
    removed and their sessions end, so they enrol again at their next sign-in. Only for an
    active member, who belongs to no other tenant (``belongs_elsewhere``)."""
    with transaction.atomic():
        locked = lock_member_change(tenant, membership_id, actor)
        locked.require_admin_actor(tenant)
        membership = locked.target
        if not membership.is_active:
            # Someone who left is nobody of this tenant's: their factors guard only their other
            # tenants now (a membership paused there comes back behind them on reactivation).
            raise AdminError(
                "not_active",
                _(
                    "%(email)s is no longer a member of %(tenant)s, so their second factors are "
                    "not this tenant's to reset. Reactivate them first if they are coming back."
                )
                % {"email": membership.user.email, "tenant": tenant.name},
            )
        if membership.user.is_staff or membership.user.is_superuser:
            # An operator's factors guard the Django admin, which acts on every tenant.
            raise AdminError(
                "operator",
                _(
                    "%(email)s is an operator of Countersign, and their second factors guard "
                    "every tenant: only an operator can reset them (manage.py two_factor_reset)."
                )
                % {"email": membership.user.email},
            )
        if belongs_elsewhere(membership):
            raise AdminError(
                "other_tenants",
                _(
                    "%(email)s also belongs to another tenant, and their second factors serve "
                    "every tenant they belong to: they can replace them on their own security "
                    "page, or an operator can reset them (manage.py two_factor_reset)."
                )
                % {"email": membership.user.email},
            )
        two_factor.two_factor_remove(user=membership.user, actor=actor, reason="reset")
        ended = sessions_end_all(user=membership.user)
        audit_record(
            tenant=tenant,
            actor=actor,
            action="member.two_factor_reset",
            obj=membership,
            data={"email": membership.user.email, "sessions_ended": ended},
        )
    return membership


def account_reset_two_factor(*, email: str) -> tuple[User, int]:
    """An operator's reset (``manage.py two_factor_reset``) for a person who lost every second
    factor and belongs to several tenants, which no single tenant's admin may reset: every factor
    removed, every session ended, an audit row in each of their tenants. Returns the person and
    how many sessions ended. A person with no factor left (a second run) is refused, changing
    nothing: no session ends, no audit row says that factors were removed."""
    with transaction.atomic():
        user = User.objects.select_for_update().filter(email=account_lookup_form(email)).first()
        if user is None:
            raise AdminError(
                "not_found", _("No account has the address %(email)s.") % {"email": shown(email)}
            )
        if not two_factor.factors_held(user):
            raise AdminError(
                "nothing_to_reset",
                _("%(email)s has no second factor to reset; nothing was changed.")
                % {"email": user.email},
            )
        two_factor.two_factor_remove(user=user, actor=None, reason="operator_reset")
        ended = sessions_end_all(user=user)
    return user, ended
