"""Agent event endpoints, for tenant admins: register (the secret is returned once), rotate the
secret, disable, enable, delete, and resend one delivery. Each writes its audit row
(``tenants.AuditEvent``) in its transaction; another tenant's id is refused like a missing one.
"""

from __future__ import annotations

import base64
import logging
import os
from collections.abc import Iterable
from datetime import timedelta
from urllib.parse import urlsplit

from django.conf import settings
from django.db import transaction
from django.db.models import Q
from django.db.models.functions import Now
from django.utils.translation import gettext as _

from common.crypto import needs_reseal
from common.egress import EgressRefused, host_reached, validate_url
from common.text import invisible_characters, unsafe_in_name
from config.clock import db_now
from intents.events.outbox import wake_delivery
from intents.hostnames import as_read, lookalike_host, unicode_form
from intents.models import AgentEvent, AgentEventDelivery, AgentEventEndpoint, EventType
from mailboxes.models import Mailbox
from tenants.models import Tenant
from tenants.once_forms import form_claim, form_done
from tenants.services import AdminError, audit_record, require_admin
from tenants.stale import StaleSave, changed_since, fingerprint

log = logging.getLogger("intents.events")

MAX_ENDPOINTS = 20
# After a rotation the previous secret keeps signing (a second signature) this long.
ROTATION_GRACE = timedelta(hours=24)


def new_secret() -> str:
    """A Standard Webhooks secret: ``whsec_`` and 32 random bytes in base64."""
    return "whsec_" + base64.b64encode(os.urandom(32)).decode()


def clean_url(url: str) -> str:
    """The URL as typed, refused (``AdminError`` on ``url``) when we will not deliver to it
    (``validate_url``) or when its host reads as another name (``lookalike_host``, the draft
    check's definition): the tenant's other admins read "b\u0430nk.example", with a Cyrillic a,
    as bank.example, and the tenant's events went to xn--bnk-6cd.example. A name of one script
    ("\u043f\u0440\u0438\u043c\u0435\u0440.\u0440\u0444") reads as what it is, and is kept."""
    allow = settings.AGENT_EVENTS_ALLOW_PRIVATE_NETWORKS
    try:
        url = validate_url(
            (url or "").strip(),
            allow_private=allow,
            allow_loopback=settings.EGRESS_ALLOW_LOOPBACK,
            require_https=not allow,
        )
    except EgressRefused as exc:
        raise AdminError(exc.code, exc.message, field="url") from None
    host = urlsplit(url).hostname or ""
    if lookalike_host(host):
        raise AdminError(
            "url_lookalike_host",
            _(
                "The URL's host %(host)s (%(ace)s) could be read as another name: it mixes "
                "scripts, or its letters look like Latin ones. Use a host name that reads as "
                "what it is."
            )
            % {"host": unicode_form(as_read(host)) or host, "ace": host_reached(host)},
            field="url",
        )
    return url


def _receiver_of(url: str) -> tuple[str, str, str, str]:
    """What every HTTP client sends ``url`` to: the scheme in lower case, the host as it is
    reached (``host_reached``: one spelling of an address or name), without the scheme's
    default port; the path and query as written (a server may tell /Hooks from /hooks). Two
    endpoints of one receiver took each event twice, each copy signed with a secret of its own,
    and the receiver, which keeps one, refused one of them."""
    parts = urlsplit(url)
    scheme = parts.scheme.lower()
    host = host_reached(parts.hostname or "")
    port = parts.port
    netloc = host if port in (None, {"https": 443, "http": 80}.get(scheme)) else f"{host}:{port}"
    return scheme, netloc, parts.path or "/", parts.query


def _clean_types(event_types: Iterable[str]) -> list[str]:
    chosen = sorted(set(event_types))
    if not chosen:
        raise AdminError("no_event_types", _("Choose at least one event."), field="event_types")
    unknown = [t for t in chosen if t not in EventType.values]
    if unknown:
        raise AdminError("unknown_event_type", _("Unknown event type."), field="event_types")
    return chosen


def _clean_description(description) -> str:
    """The endpoint's description as typed, refused when it holds what ``unsafe_in_name`` or
    ``invisible_characters`` names: the tenant's other admins read it beside the URL, where a
    U+202E turned it backwards."""
    description = str(description or "").strip()[:200]
    if unsafe := unsafe_in_name(description):
        raise AdminError(
            "invalid_description",
            _("The description cannot hold control or direction characters (%(char)s).")
            % {"char": unsafe},
            field="description",
        )
    # What draws nothing makes "prod" read as the "prod" beside it, or a description as none:
    # refused as in a token's name (tenants.tokens).
    if invisible := invisible_characters(description):
        raise AdminError(
            "invalid_description",
            _(
                "The description cannot hold characters nobody sees: %(characters)s. They make "
                "it look like another one, or like none; remove them."
            )
            % {"characters": invisible},
            field="description",
        )
    return description


def endpoint_create(
    *,
    tenant,
    url: str,
    event_types: Iterable[str],
    mailbox_id=None,
    description="",
    actor,
    form_id: str = "",
) -> tuple[AgentEventEndpoint, str]:
    """Register an endpoint; returns it with its secret, which is never shown again.
    ``form_id``: the page's one-time form id; a second post of it raises AlreadySubmitted."""
    url = clean_url(url)
    types = _clean_types(event_types)
    description = _clean_description(description)
    with transaction.atomic():
        require_admin(tenant, actor)
        receipt = form_claim(
            tenant=tenant, form_id=form_id, action="agent_events.endpoint_created", actor=actor
        )
        # The tenant's row serialises registrations: without it two at once both counted 19
        # and both inserted, past the cap.
        Tenant.objects.select_for_update(no_key=True).values_list("pk").get(pk=tenant.pk)
        mailbox = None
        if mailbox_id not in (None, ""):
            mailbox = Mailbox.objects.filter(tenant=tenant, pk=mailbox_id).first()
            if mailbox is None:
                raise AdminError("mailbox_not_found", _("Unknown mailbox."), field="mailbox")
        # Under the tenant's lock, so a form posted twice (a double click) adds one: a second
        # endpoint for the same URL, mailboxes and events sent each event there twice, one copy
        # signed with a secret nobody was shown (the browser showed the second answer's), which
        # the receiver refused until the endpoint was switched off automatically. Every mailbox
        # (no mailbox) overlaps each one: a URL taking every mailbox's events and registered
        # again for one of them (either way round) took that mailbox's events twice, the same.
        overlapping = AgentEventEndpoint.objects.filter(tenant=tenant, event_types__overlap=types)
        if mailbox is not None:
            overlapping = overlapping.filter(Q(mailbox=mailbox) | Q(mailbox__isnull=True))
        receiver = _receiver_of(url)
        # At most MAX_ENDPOINTS rows: compared here, as one receiver however it is spelled.
        if any(
            _receiver_of(other) == receiver for other in overlapping.values_list("url", flat=True)
        ):
            raise AdminError(
                "duplicate_endpoint",
                _(
                    "This tenant already has an endpoint for this URL that takes some of these "
                    "events. To get a new secret for it, rotate its secret; to change its "
                    "events, delete it and add it again."
                ),
                field="url",
            )
        if AgentEventEndpoint.objects.filter(tenant=tenant).count() >= MAX_ENDPOINTS:
            raise AdminError(
                "too_many_endpoints",
                _("A tenant may have at most %(n)s endpoints.") % {"n": MAX_ENDPOINTS},
            )
        secret = new_secret()
        endpoint = AgentEventEndpoint(
            tenant=tenant,
            url=url,
            description=description,
            event_types=types,
            mailbox=mailbox,
            created_by=actor,
        )
        endpoint.save()
        # Sealed for the row, so once it has its id; in this transaction, never seen unsealed.
        endpoint.secret_sealed = endpoint.seal_secret(secret)
        endpoint.save(update_fields=["secret_sealed"])
        form_done(receipt, endpoint.pk)
        audit_record(
            tenant=tenant,
            actor=actor,
            action="agent_events.endpoint_created",
            obj=endpoint,
            data={"url": url, "event_types": types, "mailbox_id": mailbox and mailbox.pk},
        )
    log.info("intents.events.endpoint_created", extra={"tenant_id": tenant.pk, "id": endpoint.pk})
    return endpoint, secret


def _lock(tenant, endpoint_id) -> AgentEventEndpoint:
    try:
        pk = int(endpoint_id)
    except (TypeError, ValueError):
        pk = 0
    endpoint = (
        AgentEventEndpoint.objects.select_for_update(no_key=True)
        .filter(tenant=tenant, pk=pk)
        .first()
    )
    if endpoint is None:
        raise AdminError("not_found", _("No such endpoint."))
    return endpoint


def endpoint_rotation_fingerprint(endpoint: AgentEventEndpoint) -> str:
    """Which rotation the question page saw (the end of its grace changes with each one): the
    ``based_on`` of its answer, for ``endpoint_rotate_secret``."""
    return fingerprint({"rotation": endpoint.previous_secret_expires_at})


def endpoint_rotate_secret(
    *, tenant, endpoint_id, actor, based_on: str | None = None, form_id: str = ""
) -> tuple[AgentEventEndpoint, str]:
    """A new secret (returned once); the old one also signs for ROTATION_GRACE.

    ``based_on``: the ``endpoint_rotation_fingerprint`` of the page that asked. Two secrets sign
    at most, so a rotation stops at once the one the last rotation replaced, which the page
    warns of only when it saw that rotation. An answer from a page opened before another
    admin's rotation, or posted twice by a double click, stopped the receiver's secret at once
    while its page had promised it 24 hours; it is refused (StaleSave) and changes nothing.
    None: no page asked (a command, a test). ``form_id``: the question page's one-time form id;
    a second post of it raises AlreadySubmitted, before the staleness it made is looked at."""
    with transaction.atomic():
        require_admin(tenant, actor)
        receipt = form_claim(
            tenant=tenant, form_id=form_id, action="agent_events.secret_rotated", actor=actor
        )
        endpoint = _lock(tenant, endpoint_id)
        if based_on is not None and changed_since(
            based_on, {"rotation": endpoint.previous_secret_expires_at}
        ):
            raise StaleSave(
                ["rotation"],
                _(
                    "This signing secret was rotated since you opened this page, so nothing "
                    "was changed. Read what rotating it now does, then rotate again if you "
                    "still want to."
                ),
            )
        secret = new_secret()
        AgentEventEndpoint.objects.filter(pk=endpoint.pk).update(
            secret_sealed=endpoint.seal_secret(secret),
            previous_secret_sealed=endpoint.secret_sealed,
            previous_secret_expires_at=db_now() + ROTATION_GRACE,
        )
        form_done(receipt, endpoint.pk)
        audit_record(tenant=tenant, actor=actor, action="agent_events.secret_rotated", obj=endpoint)
    endpoint.refresh_from_db()
    return endpoint, secret


def endpoint_secrets_reseal_all() -> int:
    """Re-seal every endpoint's signing secret, and the previous one kept for its rotation's
    grace, under the ring's first key and for its row (``reencrypt_secrets``): one sealed under
    another key, or for its tenant alone as the release before intents 0033 sealed it (the
    contract step of that change, once no process of that release is left; DEPLOYMENT.md
    "Upgrading"). Call inside the command's transaction. Returns how many endpoints changed."""
    changed = 0
    for endpoint in AgentEventEndpoint.objects.select_for_update(no_key=True).order_by("pk"):
        fields = [
            field
            for field in ("secret_sealed", "previous_secret_sealed")
            if getattr(endpoint, field)
            and (
                needs_reseal(getattr(endpoint, field))
                or endpoint.sealed_for_tenant_only(getattr(endpoint, field))
            )
        ]
        for field in fields:
            setattr(endpoint, field, endpoint.reseal_secret(getattr(endpoint, field)))
        if fields:
            endpoint.save(update_fields=fields)
            changed += 1
    return changed


def endpoint_disable(*, tenant, endpoint_id, actor, reason="") -> AgentEventEndpoint:
    with transaction.atomic():
        require_admin(tenant, actor)
        endpoint = _lock(tenant, endpoint_id)
        if not endpoint.enabled:
            raise AdminError("already_disabled", _("This endpoint is already disabled."))
        words = (reason or "").strip()[:500] or _("Disabled by %(who)s") % {
            "who": actor.display_name
        }
        AgentEventEndpoint.objects.filter(pk=endpoint.pk).update(
            enabled=False, disabled_automatically=False, disabled_reason=words, disabled_at=Now()
        )
        audit_record(
            tenant=tenant, actor=actor, action="agent_events.endpoint_disabled", obj=endpoint
        )
    endpoint.refresh_from_db()
    return endpoint


def endpoint_enable(*, tenant, endpoint_id, actor) -> AgentEventEndpoint:
    """Enable again: deliveries left pending resume, in order. A delivery that failed stays
    failed (the page offers to resend it)."""
    with transaction.atomic():
        require_admin(tenant, actor)
        endpoint = _lock(tenant, endpoint_id)
        if endpoint.enabled:
            raise AdminError("already_enabled", _("This endpoint is already enabled."))
        AgentEventEndpoint.objects.filter(pk=endpoint.pk).update(
            enabled=True,
            disabled_automatically=False,
            disabled_reason="",
            disabled_at=None,
            consecutive_failures=0,
        )
        audit_record(
            tenant=tenant, actor=actor, action="agent_events.endpoint_enabled", obj=endpoint
        )
    transaction.on_commit(lambda: wake_delivery([endpoint.pk]))
    endpoint.refresh_from_db()
    return endpoint


def endpoint_delete(*, tenant, endpoint_id, actor) -> None:
    """Delete an endpoint and its deliveries (the events stay, for the other endpoints)."""
    with transaction.atomic():
        require_admin(tenant, actor)
        endpoint = _lock(tenant, endpoint_id)
        audit_record(
            tenant=tenant,
            actor=actor,
            action="agent_events.endpoint_deleted",
            obj=endpoint,
            data={"url": endpoint.url},
        )
        endpoint.delete()


def delivery_resend(*, tenant, delivery_id, actor) -> AgentEventDelivery:
    """Queue the same event (same ``webhook-id``) again to the same endpoint, as a new delivery
    at the end of its queue. Only a finished delivery of an enabled endpoint can be resent."""
    with transaction.atomic():
        require_admin(tenant, actor)
        try:
            pk = int(delivery_id)
        except (TypeError, ValueError):
            pk = 0
        original = AgentEventDelivery.objects.filter(tenant=tenant, pk=pk).first()
        if original is None:
            raise AdminError("not_found", _("No such delivery."))
        endpoint = _lock(tenant, original.endpoint_id)
        if not endpoint.enabled:
            raise AdminError("endpoint_disabled", _("Enable the endpoint before resending."))
        if original.status in AgentEventDelivery.UNFINISHED:
            raise AdminError("not_finished", _("This delivery is still being attempted."))
        # Under the endpoint's lock, which every resend takes: two admins' pages (or two clicks)
        # offering Resend for the same failed delivery each queued the event again, and the
        # receiver got it once per click.
        if AgentEventDelivery.objects.filter(
            endpoint=endpoint, event_id=original.event_id, status__in=AgentEventDelivery.UNFINISHED
        ).exists():
            raise AdminError(
                "already_queued",
                _("This event is already queued again for this endpoint; it goes out once."),
            )
        # The retention purge deletes a finished event with its deliveries, and skips one locked
        # here (intents.retention._events_delete): read after the lock, an event it deleted
        # first is gone, and the resend answers as one made after the purge does.
        event = AgentEvent.objects.select_for_update(no_key=True).filter(pk=original.event_id)
        if not list(event.values_list("pk", flat=True)):
            raise AdminError("not_found", _("No such delivery."))
        resend = AgentEventDelivery.objects.create(
            tenant=tenant, endpoint=endpoint, event_id=original.event_id, resend_of=original
        )
        audit_record(
            tenant=tenant,
            actor=actor,
            action="agent_events.delivery_resent",
            obj=endpoint,
            data={"delivery_id": original.pk, "resend_id": resend.pk},
        )
    transaction.on_commit(lambda: wake_delivery([endpoint.pk]))
    return resend
