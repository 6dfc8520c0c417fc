"""Ownership of a draft from the review pages: take, hand over, release; and the reviewer's own
"away" flag. Each POST calls one service and comes back to where the person was (the draft page,
or the queue for a take from a queue row) with what happened."""

from __future__ import annotations

from django.contrib import messages
from django.http import HttpResponse
from django.shortcuts import redirect
from django.utils.translation import gettext as _
from django.views.decorators.http import require_POST

from intents import errors, services
from intents.services.assignment import UNSEEN
from review.views.common import draft_or_404, left_review
from review.views.queue import queue_page
from tenants import services as tenant_services
from tenants.access import DECIDERS, TenantRequest, tenant_view
from tenants.forms import AwayForm
from tenants.models import Membership


def _back(request: TenantRequest, draft_id: int) -> HttpResponse:
    # Only two places, named: never a URL from the request.
    if request.POST.get("back") == "queue":
        return redirect("tenant_home", request.tenant.slug)
    return redirect("draft", request.tenant.slug, draft_id)


def _holder_seen(request: TenantRequest) -> int | object | None:
    """The holder the page showed (its form's ``holder``: a user id, empty for nobody); a post
    without the field (not one of the page's) names none. Anything else reads as nobody, which
    refuses passing on anyone's hold."""
    if "holder" not in request.POST:
        return UNSEEN
    raw = request.POST["holder"]
    return int(raw) if raw.isascii() and raw.isdigit() and len(raw) < 19 else None


def _run(request: TenantRequest, draft_id: int, action, done: str, **kwargs) -> HttpResponse:
    draft = draft_or_404(request, draft_id)
    try:
        action(tenant=request.tenant, draft_id=draft.pk, actor=request.user, **kwargs)
    except errors.NotPending as error:
        # Decided while the person's page was open: who decided which version, and when in
        # their zone, as the draft page says it (the service's words are the agent API's, UTC).
        messages.error(request, left_review(error))
    except errors.DraftError as error:
        messages.error(request, error.message)
    else:
        messages.success(request, done)
    return _back(request, draft.pk)


@tenant_view(roles=DECIDERS)
@require_POST
def draft_take(request: TenantRequest, draft_id: int) -> HttpResponse:
    return _run(request, draft_id, services.draft_take, _("You hold this draft now."))


@tenant_view(roles=DECIDERS)
@require_POST
def draft_release(request: TenantRequest, draft_id: int) -> HttpResponse:
    return _run(
        request,
        draft_id,
        services.draft_release,
        _("Released: the draft is unassigned."),
        holder_seen=_holder_seen(request),
    )


@tenant_view(roles=DECIDERS)
@require_POST
def draft_hand(request: TenantRequest, draft_id: int) -> HttpResponse:
    draft = draft_or_404(request, draft_id)
    raw = request.POST.get("to", "")
    # Only this tenant's members are looked up; anyone else reads as "not a member".
    membership = (
        Membership.objects.select_related("user")
        .filter(tenant=request.tenant, user_id=int(raw))
        .first()
        # isascii: U+00B2 (superscript two) and U+0661 (Arabic-Indic one) are digits to
        # str.isdigit; int() refused the first (a 500) and read the second as 1.
        if raw.isascii() and raw.isdigit() and len(raw) < 19
        else None
    )
    if membership is None:
        messages.error(request, _("Choose a member of this tenant to hand the draft to."))
        return _back(request, draft.pk)
    name = membership.user.display_name
    return _run(
        request,
        draft.pk,
        services.draft_hand,
        _("Handed to %(name)s.") % {"name": name},
        to_user=membership.user,
        holder_seen=_holder_seen(request),
    )


@tenant_view()
@require_POST
def my_away(request: TenantRequest) -> HttpResponse:
    form = AwayForm(request.POST)
    if not form.is_valid():
        messages.error(request, str(form.errors["away"][0]))
        return queue_page(request, status=400)
    away = form.cleaned_data["away"] == "1"
    tenant_services.member_set_away(
        tenant=request.tenant, membership_id=request.membership.pk, away=away, actor=request.user
    )
    if away:
        messages.success(request, _("You are marked away: automatic assignment skips you."))
    else:
        messages.success(request, _("Welcome back: drafts can be assigned to you again."))
    return redirect("tenant_home", request.tenant.slug)
