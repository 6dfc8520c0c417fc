"""Signed-in sessions a person can see and end, and the audit row of a failed password.

Django's database session backend holds the sessions; a UserSession row (same key) says whose
session it is, from which browser and address, and when it was last seen, so that a person's
sessions can be listed and ended, and a deactivation can end all of a member's sessions at once
(deleting the Session row signs that browser out at its very next request).
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import cast

from django.contrib.auth.signals import user_logged_in, user_logged_out, user_login_failed
from django.contrib.sessions.models import Session
from django.db import connection, transaction
from django.db.models.functions import Now
from django.db.transaction import TransactionManagementError
from django.dispatch import receiver
from django.http import HttpRequest
from django.utils import timezone
from django.utils.translation import gettext as _

from config.clock import db_now
from tenants.models import Membership, SingleSignOn, User, UserSession
from tenants.signin_audit import client_ip, signin_audit

# Session keys of ours. METHOD: how this session signed in (password, passkey, sso).
# FACTOR: the second factor (or identity provider) that completed the sign-in, if any.
# SSO_TENANTS: ids of the tenants whose identity provider this session came through.
METHOD_KEY = "cs_signin_method"
FACTOR_KEY = "cs_factor"
SSO_TENANTS_KEY = "cs_sso_tenants"
# SSO_ISSUERS: for each of those tenants (its id as text), the issuer of the provider it came
# through: a session that provider opened stops opening the tenant once the tenant's single
# sign-on is turned off or names another issuer (tenants.access).
SSO_ISSUERS_KEY = "cs_sso_issuers"
# PROVEN_AT: when this session last proved who it is (tenants.sudo reads it). PROVEN_THROUGH: the
# id of the tenant whose identity provider gave that proof; absent for the person's own proof (a
# password, a second factor), which holds everywhere.
PROVEN_AT_KEY = "cs_proven_at"
PROVEN_THROUGH_KEY = "cs_proven_through"
_SEEN_KEY = "cs_seen"
SEEN_EVERY = timedelta(seconds=60)
# The code of a refusal because the session asking was ended while its request was on its way.
SESSION_ENDED = "session_ended"


def sso_session_beyond_its_tenants(request: HttpRequest) -> bool:
    """True for a session from single sign-on whose person is an active member of a tenant it
    did not come through: that session may not act on the person's whole account (their other
    sessions), because the provider that opened it speaks only for its own tenants. A person
    whose every membership came through those providers (still trusted by their tenants,
    ``sso_tenants_trusted``) is not held back."""
    if request.session.get(METHOD_KEY) != "sso":
        return False
    came_through = sso_tenants_trusted(request)
    return (
        Membership.objects.filter(user=cast(User, request.user), is_active=True)
        .exclude(tenant_id__in=came_through)
        .exists()
    )


def came_through_provider(request: HttpRequest, tenant_id: int, issuer: str) -> bool:
    """Whether this session came through the identity provider at ``issuer`` for the tenant
    ``tenant_id``: not only through that tenant's provider of the day it signed in, which may
    have been replaced since (a session from before issuers were recorded: no)."""
    issuers = request.session.get(SSO_ISSUERS_KEY)
    return (
        tenant_id in request.session.get(SSO_TENANTS_KEY, [])
        and isinstance(issuers, dict)
        and issuers.get(str(tenant_id)) == issuer
    )


def sso_tenants_trusted(request: HttpRequest) -> set[int]:
    """Ids of the tenants this session came through whose single sign-on is still on and still
    names the issuer it came through (``came_through_provider``), in one query."""
    came_through = request.session.get(SSO_TENANTS_KEY, [])
    if not came_through:
        return set()
    providers = SingleSignOn.objects.filter(tenant_id__in=came_through, enabled=True)
    return {
        tenant_id
        for tenant_id, issuer in providers.values_list("tenant_id", "issuer")
        if came_through_provider(request, tenant_id, issuer)
    }


class SessionError(Exception):
    def __init__(self, code: str, message: str):
        super().__init__(message)
        self.code = code
        self.message = message


def session_ended_message() -> str:
    return _("This session was signed out before your change was saved: nothing was changed.")


def session_still_open(*, user: User, request: HttpRequest | None) -> bool:
    """Lock ``user``'s row, then say whether the session of ``request`` is still theirs and
    open (None: no session asks, a shell or a test). Call it first in the transaction of a
    write made on that session's word: a second factor added, renewed or removed.

    A reset of the person's factors (an operator's or an admin's), a password change and a
    deactivation end their sessions under this lock; ending one session deletes its row, which
    this locks too. A request that passed the session middleware just before its session was
    ended waits for that and reads it gone. Without it, a passkey registration waiting on the
    row committed just after the operator's reset, and whoever the reset was meant to lock out
    kept a passkey. FOR NO KEY UPDATE, as ``tenants.services.belongs_elsewhere``: rows that
    merely name the person (an audit row) do not wait."""
    if not connection.in_atomic_block:
        raise TransactionManagementError("check the session inside the write")
    User.objects.select_for_update(no_key=True).filter(pk=user.pk).values_list("pk").first()
    if request is None:
        return True
    key = request.session.session_key
    if not key:
        return False
    row = (
        UserSession.objects.select_for_update()
        .filter(user=user, session_key=key)
        .values_list("pk")
        .first()
    )
    return row is not None


@receiver(user_logged_in, dispatch_uid="tenants.session_recorded")
def _record_session(sender, request: HttpRequest | None, user: User, **kwargs) -> None:
    if request is None or not hasattr(request, "session"):
        return
    method = getattr(request, "signin_method", None) or request.session.get(METHOD_KEY, "password")
    request.session[METHOD_KEY] = method
    request.session[_SEEN_KEY] = timezone.now().isoformat()
    # A sign-in is a proof: the password, a passkey, or the identity provider's word.
    session_proof_recorded(request)
    if request.session.session_key is None:
        request.session.save()
    UserSession.objects.update_or_create(
        session_key=request.session.session_key,
        defaults={
            "user": user,
            "user_agent": request.META.get("HTTP_USER_AGENT", "")[:300],
            "ip_address": client_ip(request),
            "method": method,
        },
    )


@receiver(user_login_failed, dispatch_uid="tenants.signin_failure_audited")
def _audit_failure(sender, credentials: dict, request: HttpRequest | None = None, **kwargs) -> None:
    email = str(credentials.get("username", "")).strip().lower()
    user = User.objects.filter(email=email).first() if email else None
    signin_audit(
        action="signin.failed",
        user=user,
        request=request,
        data={"email": email, "reason": "password"},
    )


def session_seen(request: HttpRequest) -> bool:
    """Record that this session is in use (at most once a minute). False when the session has no
    UserSession row any more (it was ended, or it predates session tracking): sign it out."""
    stamp = request.session.get(_SEEN_KEY)
    now = timezone.now()
    if stamp and now - datetime.fromisoformat(stamp) < SEEN_EVERY:
        return True
    seen = UserSession.objects.filter(
        session_key=request.session.session_key, user_id=request.user.pk or 0
    ).update(last_seen_at=Now())
    request.session[_SEEN_KEY] = now.isoformat()
    return bool(seen)


def session_key_renew(request: HttpRequest, *, old_key: str | None = None) -> None:
    """Give this session a new key when what it may do grows (OWASP: renew the session id on
    every privilege change), so that a copy of the old cookie, planted in this browser before the
    step or read from it, is worth nothing; its UserSession row follows the new key. ``old_key``:
    the key before something (Django's update_session_auth_hash) already renewed it."""
    if old_key is None:
        old_key = request.session.session_key
        request.session.cycle_key()
    if old_key and old_key != request.session.session_key:
        UserSession.objects.filter(session_key=old_key).update(
            session_key=request.session.session_key
        )


def session_proof_recorded(request: HttpRequest, *, through_tenant_id: int | None = None) -> None:
    """Record that this session proved, just now, who it is (tenants.sudo). ``through_tenant_id``:
    the proof is the word of that tenant's identity provider: it holds on that tenant's pages
    and the person's own, not on another tenant's (tenants.sudo.proof_is_recent)."""
    # The database clock, as tenants.sudo reads its age: every web host agrees on it.
    request.session[PROVEN_AT_KEY] = db_now().isoformat()
    if through_tenant_id is None:
        request.session.pop(PROVEN_THROUGH_KEY, None)
    else:
        request.session[PROVEN_THROUGH_KEY] = through_tenant_id


def session_factor_proven(request: HttpRequest, factor: str) -> None:
    """Record that this session proved a second factor; the first one it proves renews its key
    (the session owed it, or had to enrol one, and now goes everywhere)."""
    session_proof_recorded(request)
    if request.session.get(FACTOR_KEY):
        return
    request.session[FACTOR_KEY] = factor
    session_key_renew(request)


@receiver(user_logged_out, dispatch_uid="tenants.session_forgotten")
def _forget_session(sender, request: HttpRequest | None, user: User | None, **kwargs) -> None:
    if request is not None and request.session.session_key:
        UserSession.objects.filter(session_key=request.session.session_key).delete()


def sessions_of(user: User) -> list[UserSession]:
    # Only sessions that still exist: a key replaced by login() or flushed leaves no row behind
    # worth showing.
    live = Session.objects.filter(expire_date__gt=Now()).values("session_key")
    return list(
        UserSession.objects.filter(user=user, session_key__in=live).order_by("-last_seen_at")
    )


def session_end(
    *, user: User, session_id: int, current_key: str | None, request: HttpRequest | None = None
) -> UserSession:
    """End one of ``user``'s other sessions (another person's session and a missing one are the
    same "not found")."""
    with transaction.atomic():
        row = UserSession.objects.select_for_update().filter(pk=session_id, user=user).first()
        if row is None:
            raise SessionError("not_found", _("No such session."))
        if row.session_key == current_key:
            raise SessionError("current", _("This is the session you are using: sign out instead."))
        Session.objects.filter(session_key=row.session_key).delete()
        row.delete()
        signin_audit(
            action="signin.session_ended",
            user=user,
            request=request,
            data={"user_agent": row.user_agent, "ip": row.ip_address},
        )
    return row


def sessions_end_all(*, user: User, keep_key: str | None = None) -> int:
    """Delete every session of ``user`` (except ``keep_key``); call inside the caller's
    transaction, next to its audit row. Returns how many ended."""
    rows = UserSession.objects.filter(user=user)
    if keep_key:
        rows = rows.exclude(session_key=keep_key)
    keys = list(rows.values_list("session_key", flat=True))
    Session.objects.filter(session_key__in=keys).delete()
    UserSession.objects.filter(session_key__in=keys).delete()
    return len(keys)
