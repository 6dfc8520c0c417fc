"""Single sign-on per tenant, the database half: the admin's settings (client secret sealed) and
the mapping of a verified ID token to a member (link by the provider's subject, or by address in
the tenant's domains; just-in-time accounts only in those domains, only with the role chosen).
Each write in one transaction with its audit row."""

from __future__ import annotations

import re

from django.db import IntegrityError, transaction
from django.utils import timezone
from django.utils.translation import gettext as _
from django.utils.translation import gettext_lazy

from common import crypto
from common.addresses import account_lookup_form, lookalike_local_part, normalize_domain
from common.text import unsafe_in_name, unseen_in
from tenants.models import Membership, SingleSignOn, SsoIdentity, Tenant, User
from tenants.services import (
    AdminError,
    address_lock,
    audit_record,
    invitations_revoke_pending,
    require_admin,
    tenant_lock_open,
)
from tenants.signin_audit import signin_audit
from tenants.stale import fingerprint, refuse_if_changed

JIT_ROLES = ("", Membership.Role.VIEWER, Membership.Role.APPROVER)


def _aad(tenant_id: int) -> str:
    return f"sso:{tenant_id}:client_secret"


def client_secret(sso: SingleSignOn) -> str:
    return crypto.unseal(sso.sealed_client_secret, aad=_aad(sso.tenant_id))


SSO_LABELS = {
    "enabled": gettext_lazy("whether single sign-on is on"),
    "issuer": gettext_lazy("the issuer URL"),
    "client_id": gettext_lazy("the client ID"),
    "client_secret_set": gettext_lazy("the client secret"),
    "password_signin_allowed": gettext_lazy("whether members may sign in with a password"),
    "jit_domains": gettext_lazy("the e-mail domains"),
    "jit_role": gettext_lazy("what becomes of new people from the identity provider"),
}


def _sso_values(sso: SingleSignOn | None) -> dict[str, object]:
    """The settings a page shows (the form's defaults when there are none yet). Of the client
    secret only whether one is stored: the page never shows the secret, and a digest of it in
    the page would let anyone who reads the page test guesses against it."""
    if sso is None:
        return {
            "enabled": False,
            "issuer": "",
            "client_id": "",
            "client_secret_set": False,
            "password_signin_allowed": True,
            "jit_domains": [],
            "jit_role": "",
        }
    return {
        "enabled": sso.enabled,
        "issuer": sso.issuer,
        "client_id": sso.client_id,
        "client_secret_set": bool(sso.sealed_client_secret),
        "password_signin_allowed": sso.password_signin_allowed,
        "jit_domains": list(sso.jit_domains),
        "jit_role": sso.jit_role,
    }


def sso_fingerprint(sso: SingleSignOn | None) -> str:
    """What a single sign-on form is based on: its ``based_on`` for ``sso_settings_save``."""
    return fingerprint(_sso_values(sso))


def sso_settings_save(
    *,
    tenant: Tenant,
    actor: User,
    enabled: bool,
    issuer: str,
    client_id: str,
    client_secret: str,
    password_signin_allowed: bool,
    domains: list[str],
    jit_role: str,
    based_on: str | None = None,
) -> SingleSignOn:
    """Create or change the tenant's identity provider. A blank ``client_secret`` keeps the
    stored one. ``based_on``: the fingerprint (``sso_fingerprint``) of the settings the admin's
    page showed; a save based on settings that changed since is refused (StaleSave)."""
    if jit_role not in JIT_ROLES:
        raise AdminError(
            "invalid_role", _("Choose viewer, approver or no new accounts."), "jit_role"
        )
    try:
        domains = sorted({sso_domain(d) for d in domains if d.strip()})
    except ValueError as error:
        raise AdminError("invalid_domain", str(error), "domains") from None
    with transaction.atomic():
        require_admin(tenant, actor, open_checked_after_sends=True)
        # The tenant's row is the lock of its single sign-on row, which may not exist yet.
        tenant_lock_open(tenant)
        sso = SingleSignOn.objects.filter(tenant=tenant).first()
        refuse_if_changed(based_on=based_on, current=_sso_values(sso), labels=SSO_LABELS)
        if sso is None and not client_secret:
            raise AdminError("secret_required", _("Enter the client secret."), "client_secret")
        if enabled and not domains:
            raise AdminError(
                "domains_required",
                _("List at least one e-mail domain of your company."),
                "domains",
            )
        fields = {
            "enabled": enabled,
            "issuer": issuer.strip(),
            "client_id": client_id,
            "password_signin_allowed": password_signin_allowed,
            "jit_domains": domains,
            "jit_role": jit_role,
            "updated_at": timezone.now(),
        }
        if client_secret:
            fields["sealed_client_secret"] = crypto.seal(client_secret, aad=_aad(tenant.pk))
        sso, _created = SingleSignOn.objects.update_or_create(tenant=tenant, defaults=fields)
        audit_record(
            tenant=tenant,
            actor=actor,
            action="tenant.sso_changed",
            obj=sso,
            data={
                "enabled": enabled,
                "issuer": sso.issuer,
                "client_id": client_id,
                "secret_changed": bool(client_secret),
                "password_signin_allowed": password_signin_allowed,
                "domains": domains,
                "jit_role": jit_role,
            },
        )
    return sso


class SsoRefused(Exception):
    def __init__(self, code: str, message: str):
        super().__init__(message)
        self.code = code
        self.message = message


def _verified_or_unsaid(claim: object) -> bool:
    """``email_verified`` as the provider sent it: true, or left out (Microsoft Entra ID sends
    none). Some providers send it as text (AWS Cognito: "true"/"false"): "false" was not
    ``False``, so an address a stranger typed at sign-up, unverified, linked them to the member
    who holds it. Anything else that is not true is refused."""
    if claim is None or claim is True:
        return True
    return isinstance(claim, str) and claim.strip().lower() == "true"


# A domain in ASCII as this form has always taken it, kept as typed when IDNA (email-validator)
# refuses it: a special-use one such as corp.local, which account addresses keep as typed too
# (account_lookup_form).
_ASCII_DOMAIN = re.compile(r"^(?=.{1,253}$)([a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?\.)+[a-z]{2,63}$")


def sso_domain(typed: str) -> str:
    """A company domain of the single sign-on settings in the form account addresses hold it
    (its lower-case A-label, ``common.addresses.normalize_domain``): "B\u00fccher.test" is
    xn--bcher-kva.test, "\uff41cme.test" (a full-width a) acme.test, and an ``xn--`` label that
    is no IDNA is refused. The list was stored as typed, matched only through a conversion, and
    shown to the next admin as it came. Raises ValueError."""
    domain = typed.strip().lower().lstrip("@")
    try:
        return normalize_domain(domain)
    except ValueError:
        if _ASCII_DOMAIN.match(domain) and "xn--" not in domain:
            return domain
        raise


def _domain_form(domain: str) -> str:
    """A listed domain as account addresses hold it (its A-label); as typed if it is none."""
    try:
        return normalize_domain(domain)
    except ValueError:
        return domain


def _email_of(claims: dict, sso: SingleSignOn) -> str:
    email = str(claims.get("email") or "").strip().lower()
    if not email or "@" not in email:
        raise SsoRefused("no_email", _("The identity provider sent no e-mail address."))
    # Taken as it came, a new member's address (their name to every colleague when the provider
    # sends none) read backwards with U+202E, as a colleague's with U+200B, and a NUL was a 500.
    if unseen := unseen_in(email):
        raise SsoRefused(
            "email_unseen_character",
            _(
                "The identity provider sent an address holding %(char)s, a character that "
                "cannot be seen or that reorders the others; ask its admin to correct it."
            )
            % {"char": unseen},
        )
    if not _verified_or_unsaid(claims.get("email_verified")):
        raise SsoRefused(
            "email_unverified", _("The identity provider has not verified that address.")
        )
    # The form accounts are stored and looked up in (an IDN domain as its A-label), so the
    # provider's Unicode spelling finds the account an invitation made.
    email = account_lookup_form(email)
    if email.rsplit("@", 1)[1] not in {_domain_form(d) for d in sso.jit_domains}:
        raise SsoRefused(
            "domain_not_allowed",
            _("%(email)s is not an address of this company's domains.") % {"email": email},
        )
    return email


def _not_an_operator(user: User) -> None:
    """An operator's account (the Django admin acts on every tenant) is never signed in by a
    tenant's identity provider, whose admin could assert any address in the domains they list:
    not linked, not signed in, also when a link made earlier exists."""
    if user.is_staff or user.is_superuser:
        raise SsoRefused(
            "operator_account",
            _(
                "This account belongs to an operator of Countersign: it signs in with its "
                "password and its own second factor, not through a tenant's identity provider."
            ),
        )


def _readable_name(claim: object) -> str:
    """The provider's name claim without what ``unsafe_in_name`` refuses (controls, a tab, bidi
    overrides). Cleaned, not refused: the name is optional, the person cannot change what their
    company's provider sends, and a sign-in should not fail over how a name is spelled."""
    name = "".join(
        char if unsafe_in_name(char) is None else " " if char.isspace() else ""
        for char in str(claim or "")
    )
    return " ".join(name.split())[:150]


def _member_by_address(
    tenant: Tenant, sso: SingleSignOn, email: str, claims: dict
) -> tuple[User, bool]:
    user = User.objects.filter(email=email).first()
    membership = (
        Membership.objects.filter(tenant=tenant, user=user).first() if user is not None else None
    )
    if user is not None and membership is not None:
        if not membership.is_active or not user.is_active:
            raise SsoRefused("inactive", _("Your membership of this tenant is deactivated."))
        return user, False
    if not sso.jit_role:
        raise SsoRefused("not_a_member", _("You are not a member of this tenant; ask its admin."))
    if user is not None:
        # Automatic accounts are new accounts only. The provider is this tenant admin's, and
        # its word must not make a member of an account that exists already (another tenant's
        # person): as a member, the account's second factors and sessions would be within
        # this admin's reach. An existing account joins by invitation, signing in as itself.
        raise SsoRefused(
            "existing_account",
            _(
                "An account with this address exists already; ask this tenant's admin for an "
                "invitation."
            ),
        )
    # A new account's address is its name to every colleague: one whose local part reads as
    # another's (a Cyrillic o, a full-width letter, an accent not composed) is refused here as
    # an invitation refuses it (common.addresses.account_address), whatever the provider says.
    if why := lookalike_local_part(email):
        raise SsoRefused("email_lookalike", why)
    # A suspended tenant takes no new members (tenants.invitations._join): its row is locked
    # against tenant_suspend's lock, so a suspension either came first and is seen here, or
    # waits. FOR NO KEY UPDATE: every insert naming the tenant (a membership, a journal row)
    # takes KEY SHARE on it, which FOR UPDATE would make wait, and an invitation's sign-up for
    # the same address at this moment would deadlock with this one.
    active = Tenant.objects.select_for_update(no_key=True).filter(
        pk=tenant.pk, status=Tenant.Status.ACTIVE
    )
    if active.first() is None:
        raise SsoRefused(
            "suspended",
            _("%(tenant)s is suspended; it takes no new members.") % {"tenant": tenant.name},
        )
    # Before the member exists: an invitation to the address being written now either commits
    # first, and is closed with the others (sso_member_for), or sees the member and is refused.
    address_lock(tenant=tenant, email=email)
    try:
        with transaction.atomic():
            user = User.objects.create_user(
                email, None, full_name=_readable_name(claims.get("name"))
            )
    except IntegrityError:
        # The same address signed up at this moment (an invitation, another newcomer): the
        # account exists now, and joins by invitation like any existing one.
        raise SsoRefused(
            "existing_account",
            _(
                "An account with this address exists already; ask this tenant's admin for an "
                "invitation."
            ),
        ) from None
    Membership.objects.create(tenant=tenant, user=user, role=sso.jit_role)
    return user, True


def sso_member_for(*, tenant: Tenant, claims: dict, request=None) -> User:
    """The active member of ``tenant`` that a verified ID token stands for; SsoRefused if none."""
    sso = SingleSignOn.objects.get(tenant=tenant)
    email = _email_of(claims, sso)
    subject = str(claims["sub"])
    with transaction.atomic():
        link = (
            SsoIdentity.objects.select_for_update()
            .select_related("user")
            .filter(tenant=tenant, issuer=sso.issuer, subject=subject)
            .first()
        )
        if link is not None:
            user = link.user
            _not_an_operator(user)
            if not Membership.objects.filter(
                tenant=tenant, user=user, is_active=True, user__is_active=True
            ).exists():
                raise SsoRefused("inactive", _("Your membership of this tenant is deactivated."))
            SsoIdentity.objects.filter(pk=link.pk).update(last_signin_at=timezone.now())
            return user
        user, created = _member_by_address(tenant, sso, email, claims)
        _not_an_operator(user)
        # A link to a provider the tenant has replaced since (another issuer) signs nobody in
        # any more: it gives way, or the member (one link per tenant) could never sign in
        # through the provider that replaced it.
        replaced, _rows = (
            SsoIdentity.objects.filter(tenant=tenant, user=user).exclude(issuer=sso.issuer).delete()
        )
        try:
            with transaction.atomic():
                SsoIdentity.objects.create(
                    tenant=tenant,
                    issuer=sso.issuer,
                    subject=subject,
                    user=user,
                    last_signin_at=timezone.now(),
                )
        except IntegrityError:
            raise SsoRefused(
                "linked_elsewhere",
                _("This account is already linked to another identity at this provider."),
            ) from None
        signin_audit(
            action="signin.sso_linked",
            user=user,
            tenant=tenant,
            request=request,
            data={
                "issuer": sso.issuer,
                "subject": subject,
                "created": created,
                "replaced_links": replaced,
            },
        )
        if created:
            membership = Membership.objects.get(tenant=tenant, user=user)
            audit_record(
                tenant=tenant,
                actor=None,
                action="member.created_by_sso",
                obj=membership,
                data={"email": email, "role": sso.jit_role},
            )
            # An invitation to the newcomer's address can no longer be taken up (they are a
            # member now) but stayed pending until it expired: a row the admins saw waiting on
            # the members page. It closes with the membership, by the system, saying why.
            invitations_revoke_pending(
                tenant=tenant, actor=None, reason="joined_by_sso", email=email
            )
    return user


def sso_reseal_all() -> int:
    """Re-seal every client secret under the ring's first key (``reencrypt_secrets``); call
    inside the command's transaction. Returns how many changed."""
    changed = 0
    for sso in SingleSignOn.objects.select_for_update():
        if crypto.needs_reseal(sso.sealed_client_secret):
            sso.sealed_client_secret = crypto.seal(client_secret(sso), aad=_aad(sso.tenant_id))
            sso.save(update_fields=["sealed_client_secret"])
            changed += 1
    return changed
