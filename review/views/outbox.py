"""The outbox, the send page and its actions (cancel, resolve, release, reopen), and the
needs-attention view."""

from __future__ import annotations

import logging

from django.contrib import messages
from django.core.exceptions import PermissionDenied
from django.http import HttpResponse
from django.shortcuts import redirect, render
from django.utils.translation import gettext as _
from django.utils.translation import gettext_lazy, pgettext_lazy
from django.views.decorators.http import require_POST, require_safe

from intents import errors, selectors, services
from intents.models import SendIntent
from review import pages
from review import queries as review
from review.forms import (
    CancelForm,
    ReleaseForm,
    ReopenForm,
    ResolveForm,
)
from review.views.common import intent_or_404, require_right, run_decision
from tenants.access import DECIDERS, TenantRequest, tenant_view

log = logging.getLogger(__name__)


# Each tab counts its sends up to this many, then says "10000+" (intent_counts_capped), as the
# queue's tabs do.
OUTBOX_COUNT_CAP = review.TOTAL_CAP

OUTBOX_TABS = [
    ("", pgettext_lazy("sends", "All")),
    ("queued", pgettext_lazy("sends", "Queued")),
    ("sending", pgettext_lazy("sends", "Sending")),
    ("accepted", pgettext_lazy("sends", "Accepted")),
    ("uncertain", pgettext_lazy("sends", "Uncertain")),
    ("needs_attention", gettext_lazy("Needs attention")),
    ("failed", pgettext_lazy("sends", "Failed")),
    ("blocked", pgettext_lazy("sends", "Blocked")),
    ("expired", pgettext_lazy("sends", "Expired")),
    ("cancelled", pgettext_lazy("sends", "Cancelled")),
]


@tenant_view()
@require_safe
def outbox(request: TenantRequest) -> HttpResponse:
    state = request.GET.get("state", "")
    if state not in SendIntent.State.values:
        state = ""
    try:
        page = selectors.outbox(
            tenant=request.tenant, state=state or None, cursor=request.GET.get("after") or None
        )
    except errors.InvalidInput:
        page = selectors.outbox(tenant=request.tenant, state=state or None)
        messages.warning(request, _("That page link was not valid; showing the newest sends."))
    counts = selectors.intent_counts_capped(tenant=request.tenant, cap=OUTBOX_COUNT_CAP)
    deliveries = review.outbox_deliveries(page.items)
    for intent in page.items:
        intent.delivery_list = deliveries.get(intent.pk, [])
    pages.outbox_marks(membership=request.membership, intents=page.items)
    return render(
        request,
        "review/outbox.html",
        {
            "page": page,
            "state": state,
            "tabs": [(value, label, counts.get(value, 0)) for value, label in OUTBOX_TABS],
            "count_cap": OUTBOX_COUNT_CAP,
        },
    )


@tenant_view()
@require_safe
def outbox_intent(request: TenantRequest, intent_id: int) -> HttpResponse:
    intent = intent_or_404(request, intent_id)
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
            **pages.send_page(tenant=request.tenant, membership=request.membership, intent=intent),
            "cancel_form": CancelForm(),
            "resolve_form": ResolveForm(),
            "reopen_form": ReopenForm(),
        },
    )


def _intent_action(request: TenantRequest, intent_id, call, done: str) -> HttpResponse:
    intent = intent_or_404(request, intent_id)
    require_right(request, intent.mailbox)
    run_decision(request, lambda: call(intent), done)
    return redirect("outbox_intent", request.tenant.slug, intent.pk)


@tenant_view(roles=DECIDERS)
@require_POST
def intent_cancel(request: TenantRequest, intent_id: int) -> HttpResponse:
    form = CancelForm(request.POST)
    if not form.is_valid():
        # An over-long reason: say so and cancel nothing (it was dropped, the send cancelled).
        for errors_of_field in form.errors.values():
            for error in errors_of_field:
                messages.error(request, str(error))
        return redirect("outbox_intent", request.tenant.slug, intent_id)
    reason = form.cleaned_data["reason"]
    return _intent_action(
        request,
        intent_id,
        lambda intent: services.intent_cancel(
            tenant=request.tenant, intent_id=intent.pk, actor=request.user, reason=reason
        ),
        _("Cancelled: this send will not go out."),
    )


@tenant_view(roles=DECIDERS)
@require_POST
def intent_undo(request: TenantRequest, intent_id: int) -> HttpResponse:
    """Take an approval back inside its undo window: nothing is sent, the draft is pending."""
    intent = intent_or_404(request, intent_id)
    require_right(request, intent.mailbox)
    try:
        draft = services.intent_undo(tenant=request.tenant, intent_id=intent.pk, actor=request.user)
    except errors.NoRight as error:
        raise PermissionDenied(error.message) from None
    except errors.DraftError as error:
        log.info(
            "intents.ui.undo_refused",
            extra={"tenant_id": request.tenant.pk, "intent_id": intent.pk, "code": error.code},
        )
        messages.error(request, error.message)
        return redirect("outbox_intent", request.tenant.slug, intent.pk)
    messages.success(
        request,
        _(
            "Undone: nothing was sent. Draft %(draft)s is back in review as version %(version)s; "
            "edit it or approve it again."
        )
        % {"draft": draft.pk, "version": draft.current_version},
    )
    return redirect("draft", request.tenant.slug, draft.pk)


@tenant_view(roles=DECIDERS)
@require_POST
def intent_resolve(request: TenantRequest, intent_id: int) -> HttpResponse:
    intent = intent_or_404(request, intent_id)
    form = ResolveForm(request.POST)
    if not form.is_valid():
        # Each field's own refusal (a NUL byte, an over-long id), not one line for all of them.
        for name, field_errors in form.errors.items():
            label = form.fields[name].label if name in form.fields else ""
            for error in field_errors:
                messages.error(request, f"{label}: {error}" if label else str(error))
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
        _("Marked as accepted, with your evidence in the journal."),
    )


@tenant_view(roles=DECIDERS)
@require_POST
def intent_release(request: TenantRequest, intent_id: int) -> HttpResponse:
    """Release a held send: refused, back on its page with the message, when the customer wrote
    a message that page did not show (it shows it now)."""
    intent = intent_or_404(request, intent_id)
    require_right(request, intent.mailbox)
    form = ReleaseForm(request.POST)
    if not form.is_valid():
        messages.error(
            request,
            _(
                "The release did not say which of the customer's messages you saw; nothing was "
                "changed. Reload the page and release again."
            ),
        )
        return redirect("outbox_intent", request.tenant.slug, intent.pk)
    return _intent_action(
        request,
        intent_id,
        lambda intent: services.intent_release(
            tenant=request.tenant,
            intent_id=intent.pk,
            actor=request.user,
            messages_seen=form.cleaned_data["messages_seen"],
        ),
        _("Released: the send is queued again."),
    )


@tenant_view(roles=DECIDERS)
@require_POST
def intent_reopen(request: TenantRequest, intent_id: int) -> HttpResponse:
    """Re-approve as a new send: the draft goes back to the review queue as a new version."""
    intent = intent_or_404(request, intent_id)
    require_right(request, intent.mailbox)
    form = ReopenForm(request.POST)
    if not form.is_valid():
        messages.error(request, _("Say why this should be sent again; nothing was changed."))
        return redirect("outbox_intent", request.tenant.slug, intent.pk)
    try:
        draft = services.draft_reopen(
            tenant=request.tenant,
            draft_id=intent.draft_id,
            actor=request.user,
            reason=form.cleaned_data["reason"],
            from_intent=intent.pk,
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
        _(
            "Draft %(draft)s is back in the review queue as version %(version)s. "
            "Approving it creates a new send; send #%(send)s stays as it is."
        )
        % {"draft": draft.pk, "version": draft.current_version, "send": intent.pk},
    )
    return redirect("draft", request.tenant.slug, draft.pk)


ATTENTION_TABS = [
    ("", pgettext_lazy("sends", "All")),
    ("uncertain", pgettext_lazy("sends", "Uncertain")),
    ("needs_attention", gettext_lazy("Needs attention")),
    ("failed", pgettext_lazy("sends", "Failed")),
    ("blocked", pgettext_lazy("sends", "Blocked")),
    ("held", pgettext_lazy("sends", "Held")),
]


@tenant_view()
@require_safe
def attention(request: TenantRequest) -> HttpResponse:
    state = request.GET.get("state", "")
    if state not in {value for value, _ in ATTENTION_TABS}:
        state = ""
    intents, counts = pages.attention(
        tenant=request.tenant, membership=request.membership, state=state
    )
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
