"""Agent tokens: creation, revocation and authentication.

Format ``cs_<prefix>_<secret>``. The prefix is public (shown in the admin list, used to find the
row); only a SHA-256 digest of the whole token is stored, so a database leak yields nothing that
authenticates. SHA-256 is enough here (unlike passwords) because the secret carries 256 bits of
randomness: there is nothing to brute-force. The plaintext exists once, in the creation response.
"""

from __future__ import annotations

import hashlib
import hmac
import logging
import re
import secrets
from collections.abc import Iterable
from datetime import datetime, timedelta
from typing import NamedTuple

from django.db import IntegrityError, connection, transaction
from django.db.models.functions import Now
from django.utils import timezone
from django.utils.translation import gettext as _

from common.text import invisible_characters, unsafe_in_name
from tenants.mailbox_rights import tenant_mailbox_ids
from tenants.models import AgentToken, AuditEvent, Tenant, User
from tenants.once_forms import form_claim, form_done
from tenants.services import require_admin

logger = logging.getLogger(__name__)

TOKEN_PREFIX = "cs_"
PREFIX_LENGTH = 8
SECRET_BYTES = 32
# url-safe base64 of 32 bytes is 43 characters; the prefix alphabet excludes "_" so the
# separator is unambiguous.
TOKEN_RE = re.compile(r"^cs_([A-Za-z0-9]{8})_([A-Za-z0-9_-]{43})$")
PREFIX_ALPHABET = "ABCDEFGHJKLMNPQRSTUVWXYZabcdefghijkmnopqrstuvwxyz23456789"
# last_used_at is for people ("is this token still in use?"); minute precision is plenty and
# spares a write on every API request.
LAST_USED_RESOLUTION = timedelta(minutes=1)
VALID_SCOPES = frozenset(AgentToken.Scope.values)


class TokenError(ValueError):
    """A refused token operation, with a message meant for the admin who asked."""

    def __init__(self, message: str, field: str | None = None):
        super().__init__(message)
        self.message = message
        self.field = field


def _digest(raw: str) -> str:
    return hashlib.sha256(raw.encode()).hexdigest()


def _new_prefix() -> str:
    return "".join(secrets.choice(PREFIX_ALPHABET) for _i in range(PREFIX_LENGTH))


def _checked(
    name: str, scopes: Iterable[str], expires_at: datetime | None
) -> tuple[str, list[str]]:
    """The stripped name and sorted scopes, or the refusal."""
    name = (name or "").strip()
    scopes = sorted(set(scopes))
    if not name:
        raise TokenError(_("A token needs a name."), field="name")
    if len(name) > 100:
        raise TokenError(_("The name is longer than 100 characters."), field="name")
    if unsafe := unsafe_in_name(name):
        raise TokenError(
            _("The name cannot hold the control character %(character)s.") % {"character": unsafe},
            field="name",
        )
    # A name only of what draws nothing reads as no name, and "support-bot" with a zero-width
    # space as the "support-bot" beside it (the token list, the queue, the draft page): the
    # mailbox display name's check (mailboxes.provisioning), joiners of words and emoji kept.
    if invisible := invisible_characters(name):
        raise TokenError(
            _(
                "A name cannot hold characters nobody sees: %(characters)s. They make it look "
                "like another name, or like none; remove them."
            )
            % {"characters": invisible},
            field="name",
        )
    if not scopes:
        raise TokenError(_("Choose at least one scope."), field="scopes")
    unknown = [s for s in scopes if s not in VALID_SCOPES]
    if unknown:
        raise TokenError(
            _("Unknown scope: %(scopes)s.") % {"scopes": ", ".join(unknown)}, field="scopes"
        )
    if expires_at is not None and expires_at <= timezone.now():
        raise TokenError(_("The expiry must be in the future."), field="expires_at")
    return name, scopes


def _insert(
    *,
    tenant: Tenant,
    name: str,
    scopes: list[str],
    all_mailboxes: bool,
    expires_at: datetime | None,
    actor: User | None,
) -> tuple[AgentToken, str]:
    """Insert the row under a freshly drawn prefix; return it with the plaintext."""
    for _attempt in range(5):
        prefix = _new_prefix()
        plaintext = f"{TOKEN_PREFIX}{prefix}_{secrets.token_urlsafe(SECRET_BYTES)}"
        try:
            with transaction.atomic():
                token = AgentToken.objects.create(
                    tenant=tenant,
                    name=name,
                    prefix=prefix,
                    digest=_digest(plaintext),
                    scopes=scopes,
                    all_mailboxes=all_mailboxes,
                    created_by=actor,
                    expires_at=expires_at,
                )
            return token, plaintext
        except IntegrityError:
            if AgentToken.objects.filter(tenant=tenant, name=name).exists():
                raise TokenError(
                    _("A token with this name already exists."), field="name"
                ) from None
            continue  # a prefix collision (1 in 57^8): draw again
    raise RuntimeError("could not draw a unique token prefix")  # pragma: no cover


def token_create(
    *,
    tenant: Tenant,
    name: str,
    scopes: Iterable[str],
    mailbox_ids: Iterable[int] = (),
    expires_at: datetime | None = None,
    actor: User | None,
    form_id: str = "",
) -> tuple[AgentToken, str]:
    """Create a token and return it with its plaintext, which is never available again.

    No ``mailbox_ids``: the token reaches every mailbox of the tenant (``all_mailboxes``), those
    connected later too; otherwise exactly those. ``form_id``: the admin page's one-time form id
    (tenants.once_forms); a second post of that form raises AlreadySubmitted."""
    mailbox_ids = sorted({int(pk) for pk in mailbox_ids})
    name, scopes = _checked(name, scopes, expires_at)
    with transaction.atomic():
        if actor is not None:  # None: a command of the operators'
            require_admin(tenant, actor)
        receipt = form_claim(tenant=tenant, form_id=form_id, action="token.created", actor=actor)
        mailboxes = tenant_mailbox_ids(tenant, mailbox_ids)
        if len(mailboxes) != len(mailbox_ids):
            # Another tenant's mailbox id is treated exactly like a missing one.
            raise TokenError(_("Unknown mailbox."), field="mailboxes")
        if AgentToken.objects.filter(tenant=tenant, name=name).exists():
            raise TokenError(_("A token with this name already exists."), field="name")
        token, plaintext = _insert(
            tenant=tenant,
            name=name,
            scopes=scopes,
            all_mailboxes=not mailbox_ids,
            expires_at=expires_at,
            actor=actor,
        )
        token.mailboxes.set(mailboxes)
        form_done(receipt, token.pk)
        AuditEvent.objects.create(
            tenant=tenant,
            actor=actor,
            action="token.created",
            object_type="agent_token",
            object_id=str(token.pk),
            data={
                "name": name,
                "prefix": token.prefix,
                "scopes": scopes,
                "all_mailboxes": not mailbox_ids,
                "mailbox_ids": mailbox_ids,
                "expires_at": expires_at.isoformat() if expires_at else None,
            },
        )
    logger.info(
        "tenants.token.created",
        extra={"tenant_id": tenant.pk, "token_id": token.pk, "prefix": token.prefix},
    )
    return token, plaintext


def token_revoke(*, tenant: Tenant, token_id: int, actor: User | None) -> AgentToken:
    """Revoke a token at once. Revoking a revoked token is refused (nothing to do). ``actor``
    None: a command of the operators'."""
    with transaction.atomic():
        if actor is not None:
            require_admin(tenant, actor)
        changed = AgentToken.objects.filter(
            tenant=tenant, pk=token_id, revoked_at__isnull=True
        ).update(revoked_at=Now())
        try:
            token = AgentToken.objects.get(tenant=tenant, pk=token_id)
        except AgentToken.DoesNotExist:
            raise TokenError(_("No such token.")) from None
        if not changed:
            raise TokenError(_("This token is already revoked."))
        AuditEvent.objects.create(
            tenant=tenant,
            actor=actor,
            action="token.revoked",
            object_type="agent_token",
            object_id=str(token.pk),
            data={"name": token.name, "prefix": token.prefix},
        )
    logger.info(
        "tenants.token.revoked",
        extra={"tenant_id": tenant.pk, "token_id": token.pk, "prefix": token.prefix},
    )
    return token


def token_authenticate(raw: str | None) -> AgentToken | None:
    """The live token for a presented bearer string, or None (malformed, unknown, wrong secret,
    expired or revoked). A suspended tenant is the API's call (403), not authentication's."""
    if not raw:
        return None
    match = TOKEN_RE.match(raw)
    if match is None:
        return None
    presented = _digest(raw)
    token = (
        AgentToken.objects.select_related("tenant")
        .filter(prefix=match.group(1))
        .only(
            "id",
            "tenant",
            "name",
            "prefix",
            "digest",
            "scopes",
            "expires_at",
            "revoked_at",
            "last_used_at",
            # Every route asks the token's mailbox scope (``mailbox_scope``): deferred, it
            # cost each request a statement of its own.
            "all_mailboxes",
        )
        # The database's clock decides the expiry, as a write's recheck (token_standing) does:
        # this host's clock let an expired token read for as long as the host lagged, and
        # refused a live one on a host ahead. An annotation: no statement of its own.
        .annotate(db_now=Now())
        .first()
    )
    # Compare against a dummy digest when the prefix is unknown, so an unknown prefix and a wrong
    # secret cost the same.
    stored = token.digest if token is not None else "0" * 64
    if not hmac.compare_digest(stored, presented) or token is None:
        return None
    now = timezone.now()
    if token.revoked_at is not None:
        return None
    if token.expires_at is not None and token.expires_at <= token.db_now:
        return None
    if token.last_used_at is None or now - token.last_used_at >= LAST_USED_RESOLUTION:
        # Conditional: this UPDATE waits for a revocation in flight and then matches nothing, so
        # the request is refused rather than let in after the revocation committed, and the
        # token is never shown used after it was revoked.
        if not AgentToken.objects.filter(pk=token.pk, revoked_at__isnull=True).update(
            last_used_at=now
        ):
            return None
        token.last_used_at = now
    return token


# The token's row (FOR SHARE) and its tenant's (FOR KEY SHARE) read again inside a write's
# transaction; the ORM has neither lock on a join.
_STANDING = """
SELECT t.revoked_at IS NULL, t.expires_at, tenant.status = %s
FROM {token} t JOIN {tenant} tenant ON tenant.id = t.tenant_id
WHERE t.id = %s
FOR SHARE OF t FOR KEY SHARE OF tenant
"""
# Asked once the locks are held: the locking statement's own clock (statement_timestamp) is from
# before its wait, so a token that expired while the write waited was taken for live.
_NOT_YET = "SELECT %s > clock_timestamp()"
# The expiry and the mailbox restriction, asked once the locks are held, in one statement of its
# own: the locking statement reads the token's row as it is once its wait ends, but every other
# table (the restriction's rows) as of before the wait, so a restriction whose commit it waited
# for was taken as it had been. The token's primary key and the restriction's unique (token,
# mailbox) index: one indexed statement.
_AFTER_LOCK = """
SELECT %s::timestamptz IS NULL OR %s::timestamptz > clock_timestamp(),
       t.all_mailboxes OR EXISTS (
           SELECT 1 FROM {through} m WHERE m.{token_column} = t.id AND m.{mailbox_column} = %s
       )
FROM {token} t
WHERE t.id = %s
"""


class TokenStanding(NamedTuple):
    live: bool  # neither revoked nor expired (the database's clock, once the locks are held)
    tenant_active: bool
    # Whether its restriction (read once the locks are held) reaches the mailbox asked about;
    # None when none was.
    reaches: bool | None = None


def _after_lock_sql() -> str:
    field = AgentToken._meta.get_field("mailboxes")
    quote = connection.ops.quote_name
    return _AFTER_LOCK.format(
        through=quote(AgentToken.mailboxes.through._meta.db_table),
        token_column=quote(field.m2m_column_name()),
        mailbox_column=quote(field.m2m_reverse_name()),
        token=quote(AgentToken._meta.db_table),
    )


def token_standing(token_id: int, *, mailbox_id: int | None = None) -> TokenStanding:
    """Whether the token is live and its tenant active, read again, locked, in the caller's
    transaction, which must be the one that writes; with ``mailbox_id``, also whether the
    token's mailbox restriction reaches that mailbox.

    A request is authenticated once, at its start; a revocation, a suspension or a restriction
    committed while it runs must still stop its write. The token's row FOR SHARE: a revocation
    (or a restriction, which must update or lock the row to be ordered with the writes it
    narrows) already running is waited for and then seen, one
    that starts later waits for the caller's commit (its UPDATE needs the row), and a token's
    concurrent requests do not queue behind each other as they would with FOR UPDATE. The
    tenant's row FOR KEY SHARE, which a suspension's FOR UPDATE (``tenants.onboarding``) waits
    for and which waits for it in turn: the suspension and the write are ordered. KEY SHARE is
    the lock the write's own rows (a foreign key to the tenant) take anyway, so it adds no wait a
    write did not already have; FOR SHARE would also queue behind every sweep that locks
    tenants FOR NO KEY UPDATE and then their drafts.

    Statements: the locking one, and, once it holds the locks, one more for an expiring token
    or when ``mailbox_id`` is given (both asked in that one)."""
    if not connection.in_atomic_block:
        raise RuntimeError("token_standing must run inside the writing transaction")
    sql = _STANDING.format(
        token=connection.ops.quote_name(AgentToken._meta.db_table),
        tenant=connection.ops.quote_name(Tenant._meta.db_table),
    )
    with connection.cursor() as cursor:
        cursor.execute(sql, [Tenant.Status.ACTIVE, token_id])
        row = cursor.fetchone()
        if row is None:
            return TokenStanding(live=False, tenant_active=False, reaches=False)
        not_revoked, expires_at, tenant_active = row
        live = bool(not_revoked)
        reaches = None
        if mailbox_id is not None:
            cursor.execute(_after_lock_sql(), [expires_at, expires_at, mailbox_id, token_id])
            not_expired, reaches = cursor.fetchone()
            live = live and bool(not_expired)
        elif live and expires_at is not None:
            cursor.execute(_NOT_YET, [expires_at])
            live = bool(cursor.fetchone()[0])
    return TokenStanding(live=live, tenant_active=bool(tenant_active), reaches=reaches)


def token_reread_scope(token: AgentToken) -> None:
    """``token.all_mailboxes`` read again, for a check made long after the request's start (a
    replay that waited for its key): the object's is from the authentication, and
    ``mailbox_scope`` reads the restriction's rows afresh but trusts that flag."""
    token.refresh_from_db(fields=["all_mailboxes"])


def token_status(token: AgentToken) -> str:
    if token.revoked_at is not None:
        return "revoked"
    if token.expires_at is not None and token.expires_at <= timezone.now():
        return "expired"
    return "active"
