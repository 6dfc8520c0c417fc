"""What the review views share: 404s that do not tell another tenant's object from a missing
one, the approve-right check as a 403 that says what to ask for, and redirects that work with
htmx."""

from __future__ import annotations

from django.core.exceptions import PermissionDenied
from django.http import Http404, HttpResponse
from django.shortcuts import redirect
from django.utils.translation import gettext as _

from intents import errors, selectors
from intents.models import Draft, SendIntent
from intents.policy import can_approve
from mailboxes.models import Mailbox
from tenants.access import TenantRequest


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


def hx_redirect(request: TenantRequest, url: str) -> HttpResponse:
    if request.htmx:
        response = HttpResponse(status=204)
        response["HX-Redirect"] = url
        return response
    return redirect(url)
