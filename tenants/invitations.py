"""Invitations: an admin offers a membership, the invitee takes it up (or declines) explicitly.

The product sends no staff email, so the link the admin copies is the only proof that its holder
is the person the admin meant. Two rules follow from that:

- The link never touches an existing account. It creates an account (with the password its holder
  chooses) only when no account has that address at acceptance. Otherwise its holder must sign in
  as that account; a password set through one tenant's link therefore never opens another's.
- Accepting needs the link as well as the account: an account's address is vouched for only by the
  tenant whose link created it (an admin of tenant A can create ``x@b.test`` through A's own link),
  so B's invitation to ``x@b.test`` is accepted only by someone holding B's link. The pages record
  in the session which invitations were opened with their secret (``views_invitations``).

The admin gets the same answer whatever the address (no account, an account elsewhere, a pending
invitation elsewhere): an invitation row and a link. Only this tenant's own members are refused.
"""

from __future__ import annotations

import hashlib
import logging
import re
import secrets
from collections.abc import Iterable
from datetime import timedelta
from typing import TYPE_CHECKING, TypedDict

from django.contrib.auth.hashers import make_password
from django.core.exceptions import ValidationError
from django.core.validators import validate_email
from django.db import IntegrityError, transaction
from django.db.models import BooleanField, Q, QuerySet
from django.db.models.expressions import ExpressionWrapper
from django.db.models.functions import Now
from django.utils.translation import gettext as _

from common.addresses import account_address, lookalike_local_part
from common.text import invisible_characters, unsafe_in_name, unseen_in
from tenants.mailbox_rights import tenant_mailbox_ids
from tenants.models import AuditEvent, Invitation, Membership, Tenant, User
from tenants.services import (
    AdminError,
    address_lock,
    admin_membership_shared,
    invitations_revoke_pending,
    person_lock,
    require_admin,
)

if TYPE_CHECKING:
    from django_stubs_ext import WithAnnotations

logger = logging.getLogger(__name__)

LIFETIME = timedelta(days=7)
SECRET_BYTES = 32
EMAIL_MAX = Invitation._meta.get_field("email").max_length or 254
FULL_NAME_MAX = Invitation._meta.get_field("full_name").max_length or 150
# url-safe base64 of 32 bytes: 43 characters.
TOKEN_RE = re.compile(r"^[A-Za-z0-9_-]{43}$")


def _digest(token: str) -> str:
    # SHA-256 is enough: the secret carries 256 bits of randomness (as for agent tokens). The row
    # is found by its digest, so an attacker cannot aim a guess at a particular invitation.
    return hashlib.sha256(token.encode()).hexdigest()


def _audit(*, tenant, actor, action: str, invitation: Invitation, data: dict) -> None:
    AuditEvent.objects.create(
        tenant=tenant,
        actor=actor,
        action=action,
        object_type="invitation",
        object_id=str(invitation.pk),
        data=data,
    )


class _Expiry(TypedDict):
    is_expired: bool


if TYPE_CHECKING:
    # An invitation read through with_expiry.
    DatedInvitation = WithAnnotations[Invitation, _Expiry]


def with_expiry(qs: QuerySet[Invitation]) -> QuerySet[DatedInvitation]:
    """Annotate ``is_expired`` from the database clock."""
    return qs.annotate(
        is_expired=ExpressionWrapper(
            Q(state=Invitation.State.PENDING, expires_at__lte=Now()), output_field=BooleanField()
        )
    )


def _open(qs: QuerySet[Invitation]) -> QuerySet[Invitation]:
    return qs.filter(state=Invitation.State.PENDING, expires_at__gt=Now())


def invitation_by_token(token: str) -> DatedInvitation | None:
    """The invitation a link names, in whatever state, or None for a malformed or unknown one."""
    if not TOKEN_RE.match(token or ""):
        return None
    return (
        with_expiry(Invitation.objects.select_related("tenant", "invited_by"))
        .filter(digest=_digest(token))
        .first()
    )


def invitations_opened(*, user: User, invitation_ids: Iterable[int]) -> list[Invitation]:
    """The open invitations for this user's address among those opened with their link."""
    return list(
        _open(Invitation.objects.filter(pk__in=list(invitation_ids), email=user.email))
        .select_related("tenant", "invited_by")
        .order_by("tenant__name")
    )


def refusal(invitation: Invitation) -> AdminError:
    """Why an invitation cannot be taken up any more, in words for the person holding the link."""
    messages: dict[str, tuple[str, str]] = {
        Invitation.State.ACCEPTED: ("used", _("This invitation was already used.")),
        Invitation.State.DECLINED: ("declined", _("This invitation was declined.")),
        Invitation.State.REVOKED: (
            "revoked",
            _(
                "This invitation was withdrawn or replaced by a newer one. Ask the admin who "
                "invited you for a new link."
            ),
        ),
    }
    expired = _("This invitation has expired. Ask the admin who invited you for a new link.")
    if invitation.by_operator:
        # No admin of the tenant made this link: whoever handed it over asks an operator again.
        messages[Invitation.State.REVOKED] = (
            "revoked",
            _(
                "This invitation was withdrawn or replaced by a newer one. Ask whoever gave you "
                "the link for a new one."
            ),
        )
        expired = _("This invitation has expired. Ask whoever gave you the link for a new one.")
    code, message = messages.get(invitation.state, ("expired", expired))
    return AdminError(code, message)


def _checked(
    tenant: Tenant, email: str, role: str, mailbox_ids: Iterable[int]
) -> tuple[str, set[int], list]:
    """The normalised address, the wanted mailbox ids and their rows, or the refusal."""
    email = (email or "").strip().lower()
    # Named before validate_email, which refuses every local part beyond ASCII in the same words.
    if lookalike := lookalike_local_part(email):
        raise AdminError("invalid_email", lookalike, "email")
    try:
        validate_email(email)
    except ValidationError:
        raise AdminError("invalid_email", _("Enter a valid email address."), "email") from None
    # validate_email takes any character past U+00A0 in a domain; the address is the person's
    # name to every colleague until they give one (tenants.oidc_signin refuses the same).
    if unseen := unseen_in(email):
        raise AdminError(
            "invalid_email",
            _(
                "An address cannot hold %(char)s, a character that cannot be seen or that "
                "reorders the others."
            )
            % {"char": unseen},
            "email",
        )
    # validate_email takes up to 320 characters, the column 254: a longer address was a
    # DataError from the insert (a traceback in tenant_create), not this refusal.
    if len(email) > EMAIL_MAX:
        raise AdminError(
            "invalid_email",
            _("An address is at most %(most)d characters long; this one has %(count)d.")
            % {"most": EMAIL_MAX, "count": len(email)},
            "email",
        )
    # validate_email takes the domain as typed: "bob@\uff41cme.test" (a full-width a) was another
    # person's address than the "bob@acme.test" it reads as. Its IDNA form is Bob's own; a local
    # part that could pass for another is refused (common.addresses.account_address).
    try:
        email = account_address(email)
    except ValueError as error:
        raise AdminError("invalid_email", str(error), "email") from None
    if role not in Membership.Role.values:
        raise AdminError("invalid_role", _("Choose admin, approver or viewer."), "role")
    wanted = set(mailbox_ids)
    mailboxes = tenant_mailbox_ids(tenant, wanted)
    if len(mailboxes) != len(wanted):
        raise AdminError("unknown_mailbox", _("One of those mailboxes is not in this tenant."))
    return email, wanted, mailboxes


def full_name_checked(full_name: str) -> str:
    """A person's name as typed, trimmed; refused when it holds what ``unsafe_in_name`` names
    (every admin and approver of the tenant reads it: member list, approvals, audit)."""
    full_name = (full_name or "").strip()
    if len(full_name) > FULL_NAME_MAX:
        raise AdminError(
            "invalid_name",
            _("A name is at most %(most)d characters long; this one has %(count)d.")
            % {"most": FULL_NAME_MAX, "count": len(full_name)},
            "full_name",
        )
    if unsafe := unsafe_in_name(full_name):
        raise AdminError(
            "invalid_name",
            _("A name cannot hold the control character %(character)s.") % {"character": unsafe},
            "full_name",
        )
    # The person's name to every colleague: one only of what draws nothing reads as no name,
    # and "Ana\u200bPérez" as the Ana Pérez beside them (the display name's check,
    # mailboxes.provisioning; the joiners Persian words and emoji are written with stay).
    if invisible := invisible_characters(full_name):
        raise AdminError(
            "invalid_name",
            _(
                "A name cannot hold characters nobody sees: %(characters)s. They make it look "
                "like another name, or like none; remove them."
            )
            % {"characters": invisible},
            "full_name",
        )
    return full_name


def _replace_pending(*, tenant: Tenant, email: str, actor: User | None) -> None:
    """Refuse a member's address; revoke this tenant's pending invitations to it (in the caller's
    transaction, locked, so the new one is the only pending one)."""
    address_lock(tenant=tenant, email=email)
    if Membership.objects.filter(tenant=tenant, user__email=email).exists():
        raise AdminError(
            "already_member",
            _("%(email)s is already a member of %(tenant)s (reactivate them instead).")
            % {"email": email, "tenant": tenant.name},
            "email",
        )
    invitations_revoke_pending(tenant=tenant, actor=actor, reason="replaced", email=email)


def _insert(
    *,
    tenant: Tenant,
    email: str,
    full_name: str,
    role: str,
    approve_all_mailboxes: bool,
    token: str,
    actor: User | None,
) -> Invitation:
    """The invitation row, an operator's when ``actor`` is None (in the caller's transaction)."""
    try:
        with transaction.atomic():
            invitation = Invitation.objects.create(
                tenant=tenant,
                email=email,
                full_name=full_name,
                role=role,
                approve_all_mailboxes=approve_all_mailboxes,
                digest=_digest(token),
                invited_by=actor,
                by_operator=actor is None,
                expires_at=Now() + LIFETIME,
            )
    except IntegrityError:
        raise AdminError(
            "conflict", _("This address was just invited by someone else."), "email"
        ) from None
    invitation.refresh_from_db(fields=["created_at", "expires_at"])
    return invitation


def invitation_create(
    *,
    tenant: Tenant,
    email: str,
    role: str,
    actor: User,
    full_name: str = "",
    approve_all_mailboxes: bool = True,
    mailbox_ids: Iterable[int] = (),
) -> tuple[Invitation, str]:
    """A new invitation and the plaintext of its link's secret, which is never available again.
    A pending invitation to the same address in this tenant is revoked (replaced)."""
    email, wanted, mailboxes = _checked(tenant, email, role, mailbox_ids)
    full_name = full_name_checked(full_name)
    token = secrets.token_urlsafe(SECRET_BYTES)
    with transaction.atomic():
        # Under the lock a demotion or deactivation takes, which withdraws this admin's pending
        # invitations: an invitation written after it would survive as an admin's offer.
        require_admin(tenant, actor)
        _replace_pending(tenant=tenant, email=email, actor=actor)
        invitation = _insert(
            tenant=tenant,
            email=email,
            full_name=full_name,
            role=role,
            approve_all_mailboxes=approve_all_mailboxes,
            token=token,
            actor=actor,
        )
        invitation.approve_mailboxes.set(mailboxes)
        _audit(
            tenant=tenant,
            actor=actor,
            action="invitation.invited",
            invitation=invitation,
            data={
                "email": email,
                "role": role,
                "approve_all_mailboxes": approve_all_mailboxes,
                "mailbox_ids": sorted(wanted),
                "expires_at": invitation.expires_at.isoformat(),
            },
        )
    logger.info(
        "tenants.invitation.invited",
        extra={"tenant_id": tenant.pk, "invitation_id": invitation.pk, "role": role},
    )
    return invitation, token


def invitation_create_by_operator(
    *, tenant: Tenant, email: str, full_name: str = ""
) -> tuple[Invitation, str]:
    """An operator's invitation of an admin to ``tenant`` and its link's plaintext secret. The
    operator is nobody in the tenant: no inviter, ``by_operator`` set (see
    ``_require_inviter_still_admin``); otherwise the link works as any other. The caller holds
    the tenant's row locked, or has just created it, in its transaction."""
    email, _wanted, _mailboxes = _checked(tenant, email, Membership.Role.ADMIN, ())
    full_name = full_name_checked(full_name)
    token = secrets.token_urlsafe(SECRET_BYTES)
    with transaction.atomic():
        _replace_pending(tenant=tenant, email=email, actor=None)
        invitation = _insert(
            tenant=tenant,
            email=email,
            full_name=full_name,
            role=Membership.Role.ADMIN,
            approve_all_mailboxes=True,
            token=token,
            actor=None,
        )
        _audit(
            tenant=tenant,
            actor=None,
            action="invitation.invited",
            invitation=invitation,
            data={
                "email": email,
                "role": Membership.Role.ADMIN,
                "approve_all_mailboxes": True,
                "mailbox_ids": [],
                "expires_at": invitation.expires_at.isoformat(),
                "by_operator": True,
            },
        )
    logger.info(
        "tenants.invitation.invited",
        extra={"tenant_id": tenant.pk, "invitation_id": invitation.pk, "role": "admin"},
    )
    return invitation, token


def invitation_revoke(*, tenant: Tenant, invitation_id: int, actor: User) -> Invitation:
    with transaction.atomic():
        require_admin(tenant, actor)
        changed = Invitation.objects.filter(
            tenant=tenant, pk=invitation_id, state=Invitation.State.PENDING
        ).update(state=Invitation.State.REVOKED, closed_at=Now(), closed_by=actor)
        invitation = Invitation.objects.filter(tenant=tenant, pk=invitation_id).first()
        if invitation is None:
            raise AdminError("not_found", _("No such invitation in this tenant."))
        if not changed:
            # A sentence per state: the state's label is capitalised for a table column and
            # read "already Revoked." in the middle of one.
            already: dict[str, str] = {
                Invitation.State.ACCEPTED: _("This invitation was already accepted."),
                Invitation.State.DECLINED: _("This invitation was already declined."),
            }
            raise AdminError(
                "not_pending",
                already.get(invitation.state, _("This invitation was already revoked.")),
            )
        _audit(
            tenant=tenant,
            actor=actor,
            action="invitation.revoked",
            invitation=invitation,
            data={"email": invitation.email, "reason": "revoked"},
        )
    return invitation


def _take(invitation: Invitation, *, state: str, user: User | None) -> None:
    """Close an open invitation. The conditional UPDATE is the single-use guard: of two
    simultaneous acceptances of one link, exactly one changes the row."""
    changed = _open(Invitation.objects.filter(pk=invitation.pk)).update(
        state=state, closed_at=Now(), closed_by=user
    )
    if not changed:
        invitation.refresh_from_db(fields=["state"])
        raise refusal(invitation)


def _require_inviter_still_admin(invitation: Invitation) -> None:
    """An invitation is its inviter's offer as an admin: it is refused once they are no longer
    one (a demotion withdraws their pending invitations, but one written while the demotion was
    under way, or a deactivated and reactivated inviter's, must not make anyone a member).
    Called before ``_take``: the inviter's membership is locked before the invitation's row, in
    the order a demotion takes them. A link that is not open any more gets ``_take``'s reason.
    An operator's invitation (``by_operator``) is no admin's offer: no role backs it, nothing
    to re-check; ``_take`` still refuses it once revoked, replaced or expired."""
    if invitation.state != Invitation.State.PENDING or invitation.by_operator:
        return
    if admin_membership_shared(invitation.tenant, invitation.invited_by_id) is None:
        raise AdminError(
            "inviter_not_admin",
            _(
                "The person who invited you is no longer an admin of %(tenant)s, so this "
                "invitation no longer works. Ask an admin of %(tenant)s for a new invitation."
            )
            % {"tenant": invitation.tenant.name},
        )


def _lock_tenant(invitation: Invitation) -> None:
    """Lock the invitation's tenant row, first in an acceptance or a decline, and read its status
    again under the lock (``_join`` and ``invitation_decline`` refuse a suspended one): a
    suspension (tenants.onboarding locks the row) committing while the acceptance ran is waited
    for and seen. A plain read saw the tenant still
    active and made a member of a suspended one, the race single sign-on's newcomers close the
    same way (tenants.oidc_signin). FOR NO KEY UPDATE, and before an account is created: the
    order and the mode of that sign-up, so the two for one address wait for each other instead
    of deadlocking."""
    invitation.tenant.status = (
        Tenant.objects.select_for_update(no_key=True)
        .values_list("status", flat=True)
        .get(pk=invitation.tenant_id)
    )


def _join(invitation: Invitation, user: User) -> Membership:
    if not invitation.tenant.is_active:
        raise AdminError(
            "suspended",
            _("%(tenant)s is suspended; it takes no new members.")
            % {"tenant": invitation.tenant.name},
        )
    try:
        with transaction.atomic():
            membership = Membership.objects.create(
                tenant=invitation.tenant,
                user=user,
                role=invitation.role,
                approve_all_mailboxes=invitation.approve_all_mailboxes,
            )
    except IntegrityError:
        raise AdminError(
            "already_member",
            _("You are already a member of %(tenant)s.") % {"tenant": invitation.tenant.name},
        ) from None
    membership.approve_mailboxes.set(
        invitation.approve_mailboxes.filter(tenant_id=invitation.tenant_id)
    )
    _audit(
        tenant=invitation.tenant,
        actor=user,
        action="invitation.accepted",
        invitation=invitation,
        data={"email": invitation.email, "role": invitation.role, "membership_id": membership.pk},
    )
    return membership


def _invitation_for(invitation_id: int, user: User) -> Invitation:
    invitation = Invitation.objects.select_related("tenant").filter(pk=invitation_id).first()
    if invitation is None:
        raise AdminError("not_found", _("No such invitation."))
    if invitation.email != user.email.lower():
        raise AdminError(
            "wrong_account",
            _(
                "This invitation is for %(invited)s, and you are signed in as %(current)s. "
                "Sign out, sign in as the invited address, and open the link again."
            )
            % {"invited": invitation.email, "current": user.email},
        )
    return invitation


def invitation_accept(*, invitation_id: int, user: User) -> Membership:
    """The signed-in invitee takes up the invitation. The caller must have seen the link's secret
    in this session (see the module docstring): holding the address alone is not enough."""
    with transaction.atomic():
        invitation = _invitation_for(invitation_id, user)
        _lock_tenant(invitation)
        _require_inviter_still_admin(invitation)
        _take(invitation, state=Invitation.State.ACCEPTED, user=user)
        # The person's row, before they join (see person_lock).
        person_lock(user_id=user.pk)
        if Membership.objects.filter(tenant=invitation.tenant, user=user).exists():
            raise AdminError(
                "already_member",
                _("You are already a member of %(tenant)s.") % {"tenant": invitation.tenant.name},
            )
        membership = _join(invitation, user)
    logger.info(
        "tenants.invitation.accepted",
        extra={"tenant_id": invitation.tenant_id, "invitation_id": invitation.pk},
    )
    return membership


def invitation_decline(*, invitation_id: int, user: User) -> Invitation:
    """Refused while the tenant is suspended, as accepting is: a suspended tenant's rows and
    audit stay as they were when it was suspended (the link stays open for when it is not)."""
    with transaction.atomic():
        invitation = _invitation_for(invitation_id, user)
        _lock_tenant(invitation)
        _take(invitation, state=Invitation.State.DECLINED, user=user)
        if not invitation.tenant.is_active:
            raise AdminError(
                "suspended",
                _(
                    "%(tenant)s is suspended, so this invitation cannot be declined now; "
                    "nothing was changed."
                )
                % {"tenant": invitation.tenant.name},
            )
        _audit(
            tenant=invitation.tenant,
            actor=user,
            action="invitation.declined",
            invitation=invitation,
            data={"email": invitation.email},
        )
    return invitation


def invitation_accept_with_new_account(
    *, invitation_id: int, password: str, full_name: str = ""
) -> Membership:
    """The holder of the link creates the account for the invited address and becomes a member.
    Refused when an account with that address exists: its owner must sign in instead. As for
    ``invitation_accept``, the caller must have seen the link's secret in this session."""
    invitation = Invitation.objects.select_related("tenant").filter(pk=invitation_id).first()
    if invitation is None:
        raise AdminError("not_found", _("No such invitation."))
    full_name = full_name_checked(full_name)
    hashed = make_password(password)  # before the transaction: hashing is slow on purpose
    with transaction.atomic():
        _lock_tenant(invitation)
        _require_inviter_still_admin(invitation)
        _take(invitation, state=Invitation.State.ACCEPTED, user=None)
        exists = AdminError(
            "account_exists",
            _("An account for %(email)s already exists: sign in with it to accept.")
            % {"email": invitation.email},
        )
        if User.objects.filter(email=invitation.email).exists():
            raise exists
        user = User(
            email=invitation.email,
            full_name=full_name or invitation.full_name,
            password=hashed,
        )
        try:
            with transaction.atomic():
                user.save()
        except IntegrityError:
            raise exists from None
        Invitation.objects.filter(pk=invitation.pk).update(closed_by=user)
        AuditEvent.objects.create(
            tenant=None,
            actor=user,
            action="user.created",
            object_type="user",
            object_id=str(user.pk),
            data={"through": "invitation"},
        )
        membership = _join(invitation, user)
    logger.info(
        "tenants.invitation.accepted",
        extra={"tenant_id": invitation.tenant_id, "invitation_id": invitation.pk},
    )
    return membership
