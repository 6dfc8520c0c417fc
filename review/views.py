"""The review queue, the draft page and its decisions, the outbox and the needs-attention view.

Thin views: resolve access (tenant_view), parse input (review.forms), call one service or
selector, render. A business refusal renders as a message on the page (or an htmx fragment),
never a 500; a decision outside the person's rights is a 403 that says so.
"""

from __future__ import annotations

import logging
from datetime import timedelta

from django.contrib import messages
from django.core.exceptions import PermissionDenied
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.utils import timezone
from django.utils.html import format_html
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from intents import errors, selectors, services
from intents.models import Draft, SendIntent
from intents.policy import SECOND_APPROVER_REASON, can_approve, needs_another_approver
from review import queries as review
from review.diff import version_diff
from review.forms import (
    ApproveForm,
    BulkApproveForm,
    CancelForm,
    EditForm,
    QueueFilterForm,
    RejectForm,
    ReopenForm,
    ResolveForm,
)
from tenants.access import DECIDERS, tenant_view
from tenants.models import AgentToken

log = logging.getLogger(__name__)


def _draft_or_404(request, draft_id) -> Draft:
    try:
        return selectors.draft_get(tenant=request.tenant, draft_id=draft_id)
    except errors.NotFound:
        raise Http404("No such draft") from None


def _intent_or_404(request, intent_id) -> SendIntent:
    try:
        return selectors.intent_get(tenant=request.tenant, intent_id=intent_id)
    except errors.NotFound:
        raise Http404("No such send") from None


def _require_right(request, mailbox) -> None:
    if not can_approve(membership=request.membership, mailbox=mailbox):
        raise PermissionDenied(
            f"You do not have the right to decide on drafts from {mailbox.address}. "
            "Ask a tenant admin for approve rights on this mailbox."
        )


def _hx_redirect(request, url: str) -> HttpResponse:
    if request.htmx:
        response = HttpResponse(status=204)
        response["HX-Redirect"] = url
        return response
    return redirect(url)


# --- queue ---------------------------------------------------------------------------------------


def _queue_context(request) -> dict:
    tenant = request.tenant
    mailboxes = list(review.review_mailboxes(tenant))
    agents = list(AgentToken.objects.filter(tenant=tenant).order_by("name").only("id", "name"))
    form = QueueFilterForm(request.GET or None, mailboxes=mailboxes, agents=agents)
    queue_filter = form.queue_filter()
    page = review.queue_page(
        tenant=tenant, f=queue_filter, after=request.GET.get("after", "")[:200]
    )
    allowed = review.approvable_mailbox_ids(request.membership)
    for draft in page.rows:
        draft.can_decide = review.may_decide(allowed, draft.mailbox_id)
        # Not offered for bulk approve: the service would refuse it (four-eyes on edit).
        draft.approve_blocked = draft.can_decide and needs_another_approver(
            tenant=tenant,
            author_kind=draft.cur_author,
            author_user_id=draft.cur_author_user_id,
            user=request.user,
        )
        draft.more_recipients = (
            len(draft.cur_to or []) + len(draft.cur_cc or []) + len(draft.cur_bcc or []) - 1
        )
    params = request.GET.copy()
    params.pop("after", None)
    next_params = params.copy()
    if page.next_cursor:
        next_params["after"] = page.next_cursor
    return {
        "form": form,
        "page": page,
        "filtered": queue_filter != review.QueueFilter(),
        "any_decidable": any(d.can_decide and not d.approve_blocked for d in page.rows),
        "since_id": review.newest_draft_id(tenant=tenant),
        "shown_ids": ",".join(str(d.pk) for d in page.rows),
        "first_query": params.urlencode(),
        "next_query": next_params.urlencode() if page.next_cursor else None,
        "paged": bool(request.GET.get("after")),
    }


@tenant_view()
@require_GET
def queue(request: HttpRequest) -> HttpResponse:
    return render(request, "review/queue.html", _queue_context(request))


@tenant_view()
@require_GET
def queue_changes(request: HttpRequest) -> HttpResponse:
    """The live notice: polled by htmx, it swaps only itself, so the reader's place is kept."""
    try:
        since_id = int(request.GET.get("since", "0"))
        shown = [int(x) for x in request.GET.get("shown", "").split(",") if x][:200]
    except ValueError:
        since_id, shown = 0, []
    new, gone = review.queue_changes(tenant=request.tenant, since_id=since_id, shown=shown)
    return render(
        request,
        "review/queue.html#changes",
        {"new": new, "gone": gone, "since_id": since_id, "shown_ids": ",".join(map(str, shown))},
    )


@tenant_view(roles=DECIDERS)
@require_POST
def bulk_approve(request: HttpRequest) -> HttpResponse:
    form = BulkApproveForm(request.POST)
    back = reverse("tenant_home", args=[request.tenant.slug])
    if not form.is_valid():
        for error in form.non_field_errors():
            messages.error(request, error)
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


# --- draft page ----------------------------------------------------------------------------------


def _draft_context(request, draft_id, **extra) -> dict:
    tenant = request.tenant
    try:
        detail = selectors.draft_detail(tenant=tenant, draft_id=draft_id)
    except errors.NotFound:
        raise Http404("No such draft") from None
    draft, current = detail.draft, detail.current
    inbound = review.inbound_for(tenant=tenant, draft=draft)
    anchor = next((m for m in inbound if m.message_id == draft.in_reply_to), None)
    since = anchor.received_at if anchor else draft.created_at
    newer_inbound = [m for m in inbound if m.received_at > since and m is not anchor]
    first = detail.versions[0]
    pending = draft.status == Draft.Status.PENDING
    can_decide = pending and can_approve(membership=request.membership, mailbox=draft.mailbox)
    approve_blocked = can_decide and needs_another_approver(
        tenant=tenant,
        author_kind=current.author_kind,
        author_user_id=current.author_user_id,
        user=request.user,
    )
    recipients = review.recipients_with_warnings(
        tenant=tenant, draft=draft, version=current, inbound=inbound
    )
    added = review.added_recipients(first, current)
    for r in recipients:
        if r.address in added:
            r.notes.append(("added", "Added after the agent's first version"))
    return {
        "draft": draft,
        "detail": detail,
        "current": current,
        "first": first,
        "recipients": recipients,
        "warning_count": sum(1 for r in recipients if r.warnings),
        "inbound": inbound,
        "newer_inbound": newer_inbound,
        "diff": version_diff(first, current) if len(detail.versions) > 1 else None,
        "can_decide": can_decide,
        "approve_blocked_reason": SECOND_APPROVER_REASON if approve_blocked else "",
        "provenance": draft.provenance if isinstance(draft.provenance, dict) else {},
        "reject_form": RejectForm(),
        "unproven_earlier": [
            i
            for i in ([detail.intent] if detail.intent else []) + detail.earlier_intents
            if i.state == SendIntent.State.NEEDS_ATTENTION
            or (i.pk in detail.unproven_intent_ids and i.state != SendIntent.State.ACCEPTED)
        ]
        if pending
        else [],
        **extra,
    }


@tenant_view()
@require_GET
def draft_detail(request: HttpRequest, draft_id: int) -> HttpResponse:
    return render(request, "review/draft.html", _draft_context(request, draft_id))


def _refusal(request, draft_id, *, error, seen_version=None, status=409) -> HttpResponse:
    """The page again with what happened; for a stale approval, the diff from what was seen."""
    context = _draft_context(request, draft_id, refusal=error)
    if seen_version is not None:
        seen = next((v for v in context["detail"].versions if v.number == seen_version), None)
        if seen is not None and seen.number != context["current"].number:
            context["stale_diff"] = version_diff(seen, context["current"])
    if request.htmx:
        return render(request, "review/draft.html#decision", context)
    return render(request, "review/draft.html", context, status=status)


@tenant_view(roles=DECIDERS)
@require_POST
def draft_approve(request: HttpRequest, draft_id: int) -> HttpResponse:
    draft = _draft_or_404(request, draft_id)
    _require_right(request, draft.mailbox)
    form = ApproveForm(request.POST)
    if not form.is_valid():
        error = errors.InvalidInput(
            "invalid", "The approval did not say which version it approves; reload the page."
        )
        return _refusal(request, draft.pk, error=error, status=400)
    version = form.cleaned_data["version"]
    try:
        intent = services.draft_approve(
            tenant=request.tenant,
            draft_id=draft.pk,
            version=version,
            content_hash=form.cleaned_data["content_hash"],
            actor=request.user,
        )
    except (errors.NoRight, errors.SecondApproverRequired) as error:
        raise PermissionDenied(error.message) from None
    except errors.DraftError as error:
        log.info(
            "intents.ui.approve_refused",
            extra={"tenant_id": request.tenant.pk, "draft_id": draft.pk, "code": error.code},
        )
        return _refusal(request, draft.pk, error=error, seen_version=version)
    outbox_url = reverse("outbox_intent", args=[request.tenant.slug, intent.pk])
    messages.success(
        request,
        format_html(
            'Approved draft {} (version {}). <a href="{}">Follow the send</a>.',
            draft.pk,
            version,
            outbox_url,
        ),
    )
    if form.cleaned_data["next"]:
        following = review.next_pending(
            tenant=request.tenant, membership=request.membership, after=draft
        )
        if following is not None:
            return _hx_redirect(request, reverse("draft", args=[request.tenant.slug, following.pk]))
        return _hx_redirect(request, reverse("tenant_home", args=[request.tenant.slug]))
    return _hx_redirect(request, outbox_url)


@tenant_view(roles=DECIDERS)
@require_POST
def draft_reject(request: HttpRequest, draft_id: int) -> HttpResponse:
    draft = _draft_or_404(request, draft_id)
    _require_right(request, draft.mailbox)
    form = RejectForm(request.POST)
    if not form.is_valid():
        error = errors.InvalidInput("reason_required", "Say why you reject this draft.", "reason")
        return _refusal(request, draft.pk, error=error, status=400)
    try:
        services.draft_reject(
            tenant=request.tenant,
            draft_id=draft.pk,
            reason=form.cleaned_data["reason"],
            actor=request.user,
        )
    except errors.NoRight as error:
        raise PermissionDenied(error.message) from None
    except errors.DraftError as error:
        return _refusal(request, draft.pk, error=error)
    messages.success(request, f"Rejected draft {draft.pk}. The agent sees your reason.")
    following = review.next_pending(
        tenant=request.tenant, membership=request.membership, after=draft
    )
    if following is not None:
        return _hx_redirect(request, reverse("draft", args=[request.tenant.slug, following.pk]))
    return _hx_redirect(request, reverse("tenant_home", args=[request.tenant.slug]))


def _edit_detail(request, draft_id) -> selectors.DraftDetail:
    try:
        return selectors.draft_detail(tenant=request.tenant, draft_id=draft_id)
    except errors.NotFound:
        raise Http404("No such draft") from None


def _edit_page(request, detail, form, *, status=200, conflict_diff=None) -> HttpResponse:
    return render(
        request,
        "review/edit.html",
        {
            "draft": detail.draft,
            "current": detail.current,
            "form": form,
            "conflict_diff": conflict_diff,
        },
        status=status,
    )


def _edit_conflict(request, draft_id, conflict: errors.VersionConflict) -> HttpResponse:
    """Someone saved first: nothing was written. Show what they changed since the person's base,
    keep the person's text, and base a deliberate second save on the version now shown."""
    detail = _edit_detail(request, draft_id)
    base = next((v for v in detail.versions if v.number == conflict.base_version), None)
    form = EditForm({**request.POST.dict(), "base_version": detail.current.number})
    form.is_valid()
    form.add_error(
        None,
        f"{conflict.message} Nothing was saved. What changed since version "
        f"{conflict.base_version} is shown above and your text is kept below: bring in what you "
        f"need, then save again.",
    )
    return _edit_page(
        request,
        detail,
        form,
        status=409,
        conflict_diff=version_diff(base, detail.current) if base else None,
    )


@tenant_view(roles=DECIDERS)
@require_http_methods(["GET", "POST"])
def draft_edit(request: HttpRequest, draft_id: int) -> HttpResponse:
    """The edit form; a save names the version it was based on and the service refuses it, under
    the draft's lock, if that is no longer the current one."""
    detail = _edit_detail(request, draft_id)
    draft = detail.draft
    _require_right(request, draft.mailbox)
    if draft.status != Draft.Status.PENDING:
        messages.error(
            request, f"This draft is {draft.get_status_display().lower()}; it cannot be edited."
        )
        return redirect("draft", request.tenant.slug, draft.pk)
    if request.method == "GET":
        return _edit_page(request, detail, EditForm.of_version(detail.current))
    form = EditForm(request.POST)
    if not form.is_valid():
        return _edit_page(request, detail, form, status=400)
    data = form.cleaned_data
    try:
        version = services.draft_add_version(
            tenant=request.tenant,
            draft_id=draft.pk,
            base_version=data["base_version"],
            to=data["to_list"],
            cc=data["cc_list"],
            bcc=data["bcc_list"],
            subject=data["subject"],
            text=data["text"],
            html=data["html"],
            actor_user=request.user,
        )
    except errors.NoRight as error:
        raise PermissionDenied(error.message) from None
    except errors.VersionConflict as conflict:
        return _edit_conflict(request, draft.pk, conflict)
    except errors.DraftError as error:
        form.add_error(error.field if error.field in form.fields else None, error.message)
        return _edit_page(request, detail, form, status=409 if error.status == 409 else 400)
    messages.success(
        request, f"Saved version {version.number}. Check it once more, then approve it."
    )
    return redirect("draft", request.tenant.slug, draft.pk)


# --- outbox --------------------------------------------------------------------------------------

OUTBOX_TABS = [
    ("", "All"),
    ("queued", "Queued"),
    ("sending", "Sending"),
    ("accepted", "Accepted"),
    ("uncertain", "Uncertain"),
    ("needs_attention", "Needs attention"),
    ("failed", "Failed"),
    ("blocked", "Blocked"),
    ("expired", "Expired"),
    ("cancelled", "Cancelled"),
]


@tenant_view()
@require_GET
def outbox(request: HttpRequest) -> HttpResponse:
    state = request.GET.get("state", "")
    if state not in SendIntent.State.values:
        state = ""
    try:
        page = selectors.outbox(
            tenant=request.tenant, state=state or None, cursor=request.GET.get("after") or None
        )
    except errors.InvalidInput:
        page = selectors.outbox(tenant=request.tenant, state=state or None)
        messages.warning(request, "That page link was not valid; showing the newest sends.")
    counts = selectors.intent_counts(tenant=request.tenant)
    counts[""] = sum(counts.values())
    deliveries = review.outbox_deliveries(page.items)
    for intent in page.items:
        intent.delivery_list = deliveries.get(intent.pk, [])
    return render(
        request,
        "review/outbox.html",
        {
            "page": page,
            "state": state,
            "tabs": [(value, label, counts.get(value, 0)) for value, label in OUTBOX_TABS],
        },
    )


@tenant_view()
@require_GET
def outbox_intent(request: HttpRequest, intent_id: int) -> HttpResponse:
    intent = _intent_or_404(request, intent_id)
    deliveries = review.intent_deliveries(tenant=request.tenant, intent=intent)
    can_decide = can_approve(membership=request.membership, mailbox=intent.mailbox)
    template = "review/intent.html"
    if request.htmx and request.GET.get("fragment") == "status":
        seen = request.GET.get("seen")
        if seen and seen != intent.state:
            # The state moved since the page was drawn: its actions and journal are stale too
            # (a cancel button beside an accepted send). Reload the whole page, not the fragment.
            response = HttpResponse(status=204)
            response["HX-Refresh"] = "true"
            return response
        template += "#status"
    return render(
        request,
        template,
        {
            "intent": intent,
            "version": intent.draft_version,
            "attempts": selectors.intent_attempts(tenant=request.tenant, intent_id=intent.pk),
            "events": selectors.intent_events(tenant=request.tenant, intent_id=intent.pk),
            "deliveries": deliveries,
            "can_decide": can_decide,
            "live": _send_page_live(intent, deliveries),
            "cancel_form": CancelForm(),
            "resolve_form": ResolveForm(),
            "reopen_form": ReopenForm(),
            "can_reopen": can_decide and selectors.intent_reopenable(intent),
            "may_have_gone_out": bool(
                selectors.intents_that_may_have_gone_out(
                    tenant=request.tenant, intent_ids=[intent.pk]
                )
            ),
        },
    )


# Delivery webhooks usually arrive within seconds of acceptance; past this, a page left open stops
# polling for ones that may never come (a reload still shows them).
DELIVERY_WATCH = timedelta(minutes=30)
SETTLED_DELIVERY = frozenset({"delivered", "bounced", "complained", "rejected"})


def _send_page_live(intent: SendIntent, deliveries) -> bool:
    """Whether the send page keeps refreshing its status: while a worker may still act, and after
    acceptance until every recipient has a settled delivery state. Stopping at acceptance (the
    first webhook can land a moment after the worker commits) left "delivered" unseen."""
    if intent.state in ("queued", "sending", "uncertain"):
        return True
    if intent.state != SendIntent.State.ACCEPTED:
        return False
    settled = {d.address for d in deliveries if d.state in SETTLED_DELIVERY}
    recipients = {a for addresses in intent.recipients.values() for a in addresses}
    return not recipients <= settled and timezone.now() - intent.updated_at < DELIVERY_WATCH


def _intent_action(request, intent_id, call, done: str) -> HttpResponse:
    intent = _intent_or_404(request, intent_id)
    _require_right(request, intent.mailbox)
    try:
        call(intent)
    except errors.NoRight as error:
        raise PermissionDenied(error.message) from None
    except errors.DraftError as error:
        messages.error(request, error.message)
    else:
        messages.success(request, done)
    return redirect("outbox_intent", request.tenant.slug, intent.pk)


@tenant_view(roles=DECIDERS)
@require_POST
def intent_cancel(request: HttpRequest, intent_id: int) -> HttpResponse:
    form = CancelForm(request.POST)
    reason = form.cleaned_data["reason"] if form.is_valid() else ""
    return _intent_action(
        request,
        intent_id,
        lambda intent: services.intent_cancel(
            tenant=request.tenant, intent_id=intent.pk, actor=request.user, reason=reason
        ),
        "Cancelled: this send will not go out.",
    )


@tenant_view(roles=DECIDERS)
@require_POST
def intent_resolve(request: HttpRequest, intent_id: int) -> HttpResponse:
    intent = _intent_or_404(request, intent_id)
    form = ResolveForm(request.POST)
    if not form.is_valid():
        messages.error(request, "Give the provider message id and the evidence you have.")
        return redirect("outbox_intent", request.tenant.slug, intent.pk)
    return _intent_action(
        request,
        intent_id,
        lambda intent: services.intent_resolve_accepted(
            tenant=request.tenant,
            intent_id=intent.pk,
            actor=request.user,
            provider_message_id=form.cleaned_data["provider_message_id"],
            evidence=form.cleaned_data["evidence"],
        ),
        "Marked as accepted, with your evidence in the journal.",
    )


@tenant_view(roles=DECIDERS)
@require_POST
def intent_release(request: HttpRequest, intent_id: int) -> HttpResponse:
    return _intent_action(
        request,
        intent_id,
        lambda intent: services.intent_release(
            tenant=request.tenant, intent_id=intent.pk, actor=request.user
        ),
        "Released: the send is queued again.",
    )


@tenant_view(roles=DECIDERS)
@require_POST
def intent_reopen(request: HttpRequest, intent_id: int) -> HttpResponse:
    """Re-approve as a new send: the draft goes back to the review queue as a new version."""
    intent = _intent_or_404(request, intent_id)
    _require_right(request, intent.mailbox)
    form = ReopenForm(request.POST)
    if not form.is_valid():
        messages.error(request, "Say why this should be sent again; nothing was changed.")
        return redirect("outbox_intent", request.tenant.slug, intent.pk)
    try:
        draft = services.draft_reopen(
            tenant=request.tenant,
            draft_id=intent.draft_id,
            actor=request.user,
            reason=form.cleaned_data["reason"],
        )
    except errors.NoRight as error:
        raise PermissionDenied(error.message) from None
    except errors.DraftError as error:
        log.info(
            "intents.ui.reopen_refused",
            extra={"tenant_id": request.tenant.pk, "intent_id": intent.pk, "code": error.code},
        )
        messages.error(request, error.message)
        return redirect("outbox_intent", request.tenant.slug, intent.pk)
    messages.success(
        request,
        f"Draft {draft.pk} is back in the review queue as version {draft.current_version}. "
        f"Approving it creates a new send; send #{intent.pk} stays as it is.",
    )
    return redirect("draft", request.tenant.slug, draft.pk)


ATTENTION_TABS = [
    ("", "All"),
    ("uncertain", "Uncertain"),
    ("needs_attention", "Needs attention"),
    ("failed", "Failed"),
    ("blocked", "Blocked"),
    ("held", "Held"),
]


@tenant_view()
@require_GET
def attention(request: HttpRequest) -> HttpResponse:
    state = request.GET.get("state", "")
    if state not in {value for value, _ in ATTENTION_TABS}:
        state = ""
    intents = review.attention_intents(tenant=request.tenant, state=state)
    allowed = review.approvable_mailbox_ids(request.membership)
    unproven = selectors.intents_that_may_have_gone_out(
        tenant=request.tenant, intent_ids=[i.pk for i in intents]
    )
    for intent in intents:
        intent.can_decide = review.may_decide(allowed, intent.mailbox_id)
        intent.can_reopen = intent.can_decide and selectors.intent_reopenable(intent)
        intent.may_have_gone_out = intent.pk in unproven
    counts = review.attention_counts(tenant=request.tenant)
    return render(
        request,
        "review/attention.html",
        {
            "intents": intents,
            "state": state,
            "tabs": [(v, label, counts.get(v or "all", 0)) for v, label in ATTENTION_TABS],
            "resolve_form": ResolveForm(),
            "reopen_form": ReopenForm(),
        },
    )
