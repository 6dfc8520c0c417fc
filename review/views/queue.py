"""The review queue (the tenant's home page), its live notice and bulk approve."""

from __future__ import annotations

import dataclasses
import logging

from django.contrib import messages
from django.http import HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.utils.translation import gettext_lazy as _
from django.views.decorators.http import require_GET, require_POST

from intents import errors, services
from intents.policy import approvable_mailbox_ids, may_decide
from review import pages
from review import queries as review
from review.forms import (
    BulkApproveForm,
    QueueFilterForm,
)
from tenants.access import DECIDERS, TenantRequest, tenant_view

log = logging.getLogger(__name__)


def _queue_context(request: TenantRequest) -> dict:
    tenant = request.tenant
    mailboxes = list(review.review_mailboxes(tenant))
    agents = list(review.review_agents(tenant))
    form = QueueFilterForm(request.GET or None, mailboxes=mailboxes, agents=agents)
    queue_filter = dataclasses.replace(form.queue_filter(), viewer=request.user.pk)
    page = pages.queue(
        tenant=tenant,
        membership=request.membership,
        user=request.user,
        f=queue_filter,
        after=request.GET.get("after", "")[:200],
    )
    params = request.GET.copy()
    params.pop("after", None)
    next_params = params.copy()
    if page.next_cursor:
        next_params["after"] = page.next_cursor
    return {
        "form": form,
        "page": page,
        "filtered": dataclasses.replace(queue_filter, viewer=None, view="", sort="")
        != review.QueueFilter(),
        "view": queue_filter.view,
        "view_tabs": _view_tabs(request),
        "sort_due": queue_filter.sort == "due",
        "any_decidable": any(d.can_decide and not d.approve_blocked for d in page.rows),
        "since_id": review.newest_draft_id(tenant=tenant),
        "shown_ids": ",".join(str(d.pk) for d in page.rows),
        "first_query": params.urlencode(),
        "next_query": next_params.urlencode() if page.next_cursor else None,
        "paged": bool(request.GET.get("after")),
    }


VIEW_LABELS = {
    "": _("All"),
    "mine": _("Mine"),
    "unassigned": _("Unassigned"),
    "escalated": _("Escalated"),
}


def _view_tabs(request: TenantRequest) -> list[dict]:
    """Each view's tab: its label, its pending count, and its query string (the other filters
    kept, the page cursor dropped)."""
    counts = review.queue_view_counts(tenant=request.tenant, user_id=request.user.pk)
    tabs = []
    for name, label in VIEW_LABELS.items():
        params = request.GET.copy()
        params.pop("after", None)
        params.pop("view", None)
        if name:
            params["view"] = name
        tabs.append(
            {"name": name, "label": label, "count": counts[name], "query": params.urlencode()}
        )
    return tabs


@tenant_view()
@require_GET
def queue(request: TenantRequest) -> HttpResponse:
    return render(request, "review/queue.html", _queue_context(request))


@tenant_view()
@require_GET
def queue_changes(request: TenantRequest) -> HttpResponse:
    """The live notice: polled by htmx, it swaps only itself, so the reader's place is kept."""
    try:
        since_id = int(request.GET.get("since", "0"))
        shown = [int(x) for x in request.GET.get("shown", "").split(",") if x][:200]
    except ValueError:
        since_id, shown = 0, []
    new, gone = review.queue_changes(tenant=request.tenant, since_id=since_id, shown=shown)
    holders = review.queue_holders(tenant=request.tenant, shown=shown)
    allowed = approvable_mailbox_ids(request.membership)
    for draft in holders:
        draft.can_decide = may_decide(allowed, draft.mailbox_id)
    return render(
        request,
        "review/queue.html#changes",
        {
            "new": new,
            "gone": gone,
            "since_id": since_id,
            "shown_ids": ",".join(map(str, shown)),
            # Each shown row's holder badge, swapped in place (out of band).
            "holders": holders,
        },
    )


@tenant_view(roles=DECIDERS)
@require_POST
def bulk_approve(request: TenantRequest) -> HttpResponse:
    form = BulkApproveForm(request.POST)
    back = reverse("tenant_home", args=[request.tenant.slug])
    if not form.is_valid():
        # Iterating an ErrorList gives the messages (str); the stubs say ValidationError too.
        for error in form.non_field_errors():
            messages.error(request, str(error))
        return redirect(back)
    approved, refused = 0, []
    for draft_id, version, content_hash in form.cleaned_data["items"]:
        # Each draft is checked against the version and hash its own row showed.
        try:
            services.draft_approve(
                tenant=request.tenant,
                draft_id=draft_id,
                version=version,
                content_hash=content_hash,
                actor=request.user,
            )
        except errors.DraftError as error:
            refused.append((draft_id, error.message))
        else:
            approved += 1
    if approved:
        messages.success(
            request, f"Approved {approved} draft{'s' if approved != 1 else ''}; they are sending."
        )
    for draft_id, message in refused:
        messages.error(request, f"Draft {draft_id} was not approved: {message}")
    return redirect(back)
