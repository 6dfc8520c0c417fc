"""The review queue (the tenant's home page), its live notice and bulk approve."""

from __future__ import annotations

import dataclasses
import logging

from django.contrib import messages
from django.http import HttpResponse, JsonResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.utils.html import format_html
from django.utils.translation import gettext as _
from django.utils.translation import gettext_lazy, ngettext, pgettext_lazy
from django.views.decorators.http import require_POST, require_safe

from intents import errors, services
from intents.policy import EARLIER_VERSION_REASON, approvable_mailbox_ids, may_decide
from intents.selectors.queue import QUEUE_SORTS
from review import pages
from review import queries as review
from review.forms import (
    BulkApproveForm,
    QueueFilterForm,
    queue_place,
)
from review.views.common import left_review
from tenants.access import DECIDERS, TenantRequest, tenant_view

log = logging.getLogger(__name__)


def _queue_context(request: TenantRequest) -> dict:
    tenant = request.tenant
    mailboxes = list(review.review_mailboxes(tenant))
    agents = list(review.review_agents(tenant))
    form = QueueFilterForm(request.GET or None, mailboxes=mailboxes, agents=agents)
    queue_filter = dataclasses.replace(form.queue_filter(), viewer=request.user.pk)
    sort = form.queue_sort()
    page = pages.queue(
        tenant=tenant,
        membership=request.membership,
        user=request.user,
        f=queue_filter,
        after=request.GET.get("after", "")[:200],
        before=request.GET.get("before", "")[:200],
        sort=sort,
    )
    params = request.GET.copy()
    params.pop("after", None)
    params.pop("before", None)
    next_params, prev_params = params.copy(), params.copy()
    if page.next_cursor:
        next_params["after"] = page.next_cursor
    if page.prev_cursor:
        prev_params["before"] = page.prev_cursor
    return {
        # A tenant without a mailbox has no drafts to come: its empty queue says what is missing.
        "no_mailbox": not mailboxes,
        "sort_label": QUEUE_SORTS[sort].label,
        "prev_query": prev_params.urlencode() if page.prev_cursor else None,
        "place": queue_place(request.GET.urlencode()),
        "form": form,
        "page": page,
        "filtered": dataclasses.replace(queue_filter, viewer=None, view="") != review.QueueFilter(),
        "view": queue_filter.view,
        "view_tabs": _view_tabs(request),
        "sort_due": sort == "due",
        "any_decidable": any(d.can_decide and not d.approve_blocked for d in page.rows),
        # The title of the badge of a row blocked for an earlier version (the rule, in full).
        "earlier_version_reason": EARLIER_VERSION_REASON,
        "since_id": review.newest_draft_id(tenant=tenant),
        "shown_ids": ",".join(str(d.pk) for d in page.rows),
        "first_query": params.urlencode(),
        "next_query": next_params.urlencode() if page.next_cursor else None,
        "paged": bool(request.GET.get("after") or request.GET.get("before")),
    }


VIEW_LABELS = {
    "": pgettext_lazy("queue view", "All"),
    "mine": gettext_lazy("Mine"),
    "unassigned": gettext_lazy("Unassigned"),
    "escalated": gettext_lazy("Escalated"),
}


def _view_tabs(request: TenantRequest) -> list[dict]:
    """Each view's tab: its label, its pending count, and its query string (the other filters
    kept, both page cursors dropped: a tab opens its view's first page, not the rows before a
    place in another view)."""
    counts = review.queue_view_counts(tenant=request.tenant, user_id=request.user.pk)
    tabs = []
    for name, label in VIEW_LABELS.items():
        params = request.GET.copy()
        params.pop("after", None)
        params.pop("before", None)
        params.pop("view", None)
        if name:
            params["view"] = name
        tabs.append(
            {"name": name, "label": label, "count": counts[name], "query": params.urlencode()}
        )
    return tabs


@tenant_view()
@require_safe
def queue(request: TenantRequest) -> HttpResponse:
    return queue_page(request)


def queue_page(request: TenantRequest, *, status: int = 200) -> HttpResponse:
    """The queue as a GET shows it; with a 400 after a refused POST of the queue's own."""
    return render(request, "review/queue.html", _queue_context(request), status=status)


@tenant_view()
@require_safe
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


@tenant_view()
@require_safe
def nav_counts(request: TenantRequest) -> HttpResponse:
    """The navigation's counts, polled by app.js every 15 s while the tab is visible (htmx's
    trigger filters would need eval, which the CSP forbids). Out-of-band spans only."""
    counts = review.nav_counts(tenant=request.tenant, user=request.user)
    response = render(request, "review/_nav_counts.html", {"counts": counts})
    response["Cache-Control"] = "no-store"
    return response


def _say_bulk_outcome(
    request: TenantRequest, approved: int, refused: list[tuple[int, errors.DraftError]]
) -> None:
    """The flash messages of a whole-form bulk approval: how many went, the undo window, and
    each draft left out with its reason (and a link to it)."""
    if approved:
        messages.success(
            request,
            ngettext(
                "Approved %(count)d draft; it is sending.",
                "Approved %(count)d drafts; they are sending.",
                approved,
            )
            % {"count": approved},
        )
    if approved and request.tenant.send_hold_seconds:
        messages.info(
            request,
            format_html(
                '{} <a href="{}">{}</a>',
                ngettext(
                    "The approved draft can be undone from the outbox for %(seconds)d s.",
                    "The %(count)d approved drafts can be undone from the outbox for %(seconds)d s.",
                    approved,
                )
                % {"count": approved, "seconds": request.tenant.send_hold_seconds},
                reverse("outbox", args=[request.tenant.slug]) + "?state=queued",
                _("Open the outbox"),
            ),
        )
    for draft_id, refusal in refused:
        said = _("Draft %(draft)s was not approved: %(message)s") % {
            "draft": draft_id,
            "message": refusal.message,
        }
        if isinstance(refusal, errors.NotFound):
            messages.error(request, said)
            continue
        # Left out with what to do about it, most often "open the draft": a link to it.
        messages.error(
            request,
            format_html(
                '{} <a href="{}">{}</a>',
                said,
                reverse("draft", args=[request.tenant.slug, draft_id]),
                _("Open draft %(draft)s") % {"draft": draft_id},
            ),
        )


@tenant_view(roles=DECIDERS)
@require_POST
def bulk_approve(request: TenantRequest) -> HttpResponse:
    form = BulkApproveForm(request.POST)
    # Back to the same filters, order and page: the query is rebuilt from known keys onto this
    # tenant's queue path, so the input cannot send the person anywhere else.
    back = reverse("tenant_home", args=[request.tenant.slug])
    place = queue_place(request.POST.get("place", ""))
    if place:
        back = f"{back}?{place}"
    # app.js posts one draft at a time with this header to show "Approving 3 of 12…"; each
    # post is decided here exactly as a whole-form post is, and answered in JSON.
    progressive = request.headers.get("X-Bulk-Progress") == "1"
    if not form.is_valid():
        if progressive:
            return JsonResponse(
                {"error": " ".join(str(e) for e in form.non_field_errors())}, status=400
            )
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
                unseen=True,
            )
        except errors.DraftError as error:
            if isinstance(error, errors.NotPending):
                # Decided by a colleague meanwhile: who, which version and when, in the reader's
                # zone, as the draft page says it (the service's words are the agent API's, UTC).
                error.message = left_review(error)
            refused.append((draft_id, error))
        else:
            approved += 1
    if progressive:
        return JsonResponse(
            {
                "approved": approved,
                "refused": [
                    {"draft": d, "code": e.code, "message": str(e.message)} for d, e in refused
                ],
            }
        )
    _say_bulk_outcome(request, approved, refused)
    return redirect(back)
