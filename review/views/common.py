"""What the review views share: 404s that do not tell another tenant's object from a missing
one, the approve-right check as a 403 that says what to ask for, and redirects that work with
htmx."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from django.contrib import messages
from django.core.exceptions import PermissionDenied
from django.http import Http404, HttpResponse
from django.shortcuts import redirect
from django.utils.translation import gettext as _

from intents import errors, selectors
from intents.models import Draft, SendIntent
from intents.policy import can_approve
from mailboxes.models import Mailbox
from tenants.access import TenantRequest
from tenants.templatetags.zones import zoned


def draft_or_404(request: TenantRequest, draft_id: int) -> Draft:
    try:
        return selectors.draft_get(tenant=request.tenant, draft_id=draft_id)
    except errors.NotFound:
        raise Http404("No such draft") from None


def intent_or_404(request: TenantRequest, intent_id: int) -> SendIntent:
    try:
        return selectors.intent_get(tenant=request.tenant, intent_id=intent_id)
    except errors.NotFound:
        raise Http404("No such send") from None


def require_right(request: TenantRequest, mailbox: Mailbox) -> None:
    if not can_approve(membership=request.membership, mailbox=mailbox):
        raise PermissionDenied(
            _(
                "You do not have the right to decide on drafts from %(address)s. "
                "Ask a tenant admin for approve rights on this mailbox."
            )
            % {"address": mailbox.address}
        )


def left_review(error: errors.NotPending) -> str:
    """What happened to a draft that left review while the person was on it, in their words and
    time zone: who decided, which version, when ("Ana approved version 3 at 2 May, 14:02 CEST.").
    A refusal that does not come from the draft's row keeps the service's own words."""
    if error.state is None or error.decided_at is None:
        return error.message
    values = {
        "who": error.decided_by.display_name if error.decided_by else _("Someone"),
        "version": error.version,
        "when": zoned(error.decided_at, "j M, H:i"),
    }
    if error.state == Draft.Status.APPROVED:
        return _("%(who)s approved version %(version)s at %(when)s.") % values
    if error.state == Draft.Status.REJECTED:
        return _("%(who)s rejected version %(version)s at %(when)s.") % values
    if error.state == Draft.Status.WITHDRAWN:
        return _("The agent withdrew this draft at %(when)s.") % values
    if error.state == Draft.Status.EXPIRED:
        return _("This draft expired at %(when)s: its review deadline passed.") % values
    return error.message


def run_decision(request: TenantRequest, call, done: str | Callable[[Any], str]) -> None:
    """Run a person's decision (a service call): a missing right is a 403, any other refusal
    the service names is an error message on the next page, success says ``done`` (or
    ``done(result)``, when what to say depends on what the call found)."""
    try:
        result = call()
    except errors.NoRight as error:
        raise PermissionDenied(error.message) from None
    except errors.NotPending as error:
        messages.error(request, left_review(error))
    except errors.DraftError as error:
        messages.error(request, error.message)
    else:
        messages.success(request, done(result) if callable(done) else done)


def hx_redirect(request: TenantRequest, url: str) -> HttpResponse:
    if request.htmx:
        response = HttpResponse(status=204)
        response["HX-Redirect"] = url
        return response
    return redirect(url)
