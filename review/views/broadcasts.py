"""The broadcast pages: the list, one broadcast (a sample recipient's message, its HTML drawn in
the draft page's sandboxed frame, the recipient count, who is filtered out, progress) and a
person's decisions on it: approve, reject, pause, resume, cancel. Each decision is one intents
service; a business refusal is a message."""

from __future__ import annotations

import math
from collections.abc import Callable

from django.contrib import messages
from django.http import Http404, HttpResponse, StreamingHttpResponse
from django.shortcuts import redirect, render
from django.utils.translation import gettext as _
from django.utils.translation import ngettext
from django.views.decorators.http import require_http_methods, require_POST, require_safe

from common.csv_cells import csv_lines
from config.clock import db_now
from intents import errors
from intents.policy import (
    BROADCAST_AUTHOR_REASON,
    approvable_mailbox_ids,
    broadcast_needs_another_approver,
    can_approve,
)
from intents.selectors.broadcasts import (
    broadcast_addresses_not_ascii,
    broadcast_get,
    broadcast_pace,
    broadcast_progress,
    broadcast_recipient_rows,
    broadcast_sample,
    broadcast_values_invisible,
    broadcast_values_lookalike_hosts,
    broadcast_values_misleading_links,
    broadcast_variable_names,
    broadcasts_page,
)
from intents.services import broadcast_controls as controls
from intents.services import broadcasts as service
from review.forms_broadcast import BroadcastForm
from review.pages import (
    invisible_named,
    links_named,
    lookalike_hosts_named,
    looks_named,
    styles_named,
)
from review.queries import review_mailboxes
from review.views.bodies import email_document_refused, email_document_view, framed_html
from review.views.common import run_decision
from tenants.access import DECIDERS, TenantRequest, tenant_view
from tenants.send_stops import with_sends_in_flight

LIST_LIMIT = 100


def _broadcast_or_404(request: TenantRequest, broadcast_id: int):
    try:
        return broadcast_get(tenant=request.tenant, broadcast_id=broadcast_id)
    except errors.NotFound:
        raise Http404("No such broadcast") from None


@tenant_view()
@require_safe
def broadcast_list(request: TenantRequest) -> HttpResponse:
    try:
        page = broadcasts_page(
            tenant=request.tenant, cursor=request.GET.get("after") or None, limit=LIST_LIMIT
        )
    except errors.InvalidInput:
        page = broadcasts_page(tenant=request.tenant, limit=LIST_LIMIT)
        messages.warning(request, _("That page link was not valid; showing the newest broadcasts."))
    can_post = request.membership.role in DECIDERS
    return render(request, "review/broadcasts.html", {"page": page, "can_post": can_post})


def _postable_mailboxes(request: TenantRequest) -> list:
    """The tenant's active mailboxes this person may decide for (the service checks again)."""
    allowed = approvable_mailbox_ids(request.membership)
    return [
        m
        for m in review_mailboxes(request.tenant).filter(status="active")
        if allowed is None or m.pk in allowed
    ]


def _create(request: TenantRequest, form: BroadcastForm):
    """The broadcast, or None after putting the service's refusal on the form; every bad
    recipient row is returned to be listed (the service saved nothing)."""
    data = form.cleaned_data
    try:
        return service.broadcast_create(
            tenant=request.tenant,
            mailbox=data["mailbox"],
            name=data["name"],
            subject=data["subject"],
            text=data["text"],
            actor_user=request.user,
            **data["recipients"],
        ), None
    except errors.BroadcastRowsInvalid as exc:
        form.add_error("recipients", exc.message)
        return None, exc
    except errors.DraftError as exc:
        form.add_error(exc.field if exc.field in form.fields else None, exc.message)
        return None, None


@tenant_view(roles=DECIDERS)
@require_http_methods(["GET", "HEAD", "POST"])
def broadcast_new(request: TenantRequest) -> HttpResponse:
    """A person posts a broadcast for review: the same checks as the agent API, every bad row
    listed, nothing saved on any error."""
    mailboxes = _postable_mailboxes(request)
    bad_rows = None
    if request.method == "POST":
        form = BroadcastForm(request.POST, request.FILES, mailboxes=mailboxes)
        if form.is_valid():
            broadcast, bad_rows = _create(request, form)
            if broadcast is not None:
                messages.success(request, _("Posted: it waits for approval."))
                return redirect("broadcast", request.tenant.slug, broadcast.pk)
    else:
        form = BroadcastForm(mailboxes=mailboxes)
    return render(
        request,
        "review/broadcast_new.html",
        {"form": form, "bad_rows": bad_rows, "has_mailboxes": bool(mailboxes)},
        status=422 if form.errors else 200,
    )


def _sample_position(request: TenantRequest, broadcast) -> int:
    """The recipient (canonical position) whose message the page shows: ``?sample=``, kept
    within the list."""
    try:
        return max(0, min(int(request.GET.get("sample", 0)), broadcast.recipient_count - 1))
    except ValueError:
        return 0


def _undo_seconds_left(broadcast) -> int:
    """Whole seconds (rounded up, database clock) left in the approval's undo window; 0 when it
    cannot be undone. Display only: broadcast_undo decides again under the row lock."""
    if (
        broadcast.hold_until is None
        or broadcast.state not in controls.UNDOABLE
        or broadcast.fanout_position >= 0
    ):
        return 0
    return max(0, math.ceil((broadcast.hold_until - db_now()).total_seconds()))


@tenant_view()
@require_safe
def broadcast_detail(request: TenantRequest, broadcast_id: int) -> HttpResponse:
    broadcast = _broadcast_or_404(request, broadcast_id)
    position = _sample_position(request, broadcast)
    sample = broadcast_sample(broadcast, position)
    # What the approver reads: this recipient's message (the template with their values), or
    # the template when there is no sample (a draft's page names the same, cf3f1a5).
    message = sample or {
        "subject": broadcast.subject,
        "text": broadcast.text,
        "html": broadcast.html,
    }
    can_decide = can_approve(membership=request.membership, mailbox=broadcast.mailbox)
    # Four-eyes: broadcast_approve refuses its author; the page says so before the click.
    approve_blocked_reason = (
        str(BROADCAST_AUTHOR_REASON)
        if can_decide
        and broadcast_needs_another_approver(
            tenant=request.tenant, broadcast=broadcast, user=request.user
        )
        else ""
    )
    return render(
        request,
        "review/broadcast.html",
        {
            "broadcast": broadcast,
            "progress": broadcast_progress(broadcast),
            "not_ascii": broadcast_addresses_not_ascii(broadcast),
            "values_invisible": broadcast_values_invisible(broadcast),
            "values_lookalike_hosts": broadcast_values_lookalike_hosts(broadcast),
            "values_misleading_links": broadcast_values_misleading_links(broadcast),
            "sample": sample,
            "sample_position": position,
            # Kept by the frame's look links (review/_reader_looks.html): the same recipient.
            "sample_query": f"sample={position}" if position else "",
            # The look the sample's frame shows (review/_reader_looks.html).
            "frame_look": "phone" if request.GET.get("look") == "phone" else "",
            # Its recipients were replaced while the page was read: no approve button for a
            # hash whose message the page could not show.
            "changed": sample is None
            and broadcast.recipient_count > 0
            and broadcast.body_purged_at is None,
            "can_decide": can_decide,
            "undo_seconds": _undo_seconds_left(broadcast),
            # Paused inside the window: nothing goes out when it closes (review/_undo.html).
            "undo_paused": broadcast.state == controls.State.PAUSED,
            # The author's pace is on no other page and in no hash: the approver reads it here.
            "pace": broadcast_pace(broadcast),
            "approve_blocked_reason": approve_blocked_reason,
            **invisible_named(
                subject=message["subject"], text=message["text"], html=message["html"]
            ),
            **lookalike_hosts_named(
                subject=message["subject"], text=message["text"], html=message["html"]
            ),
            **links_named(message["html"]),
            **looks_named(message["html"]),
            **styles_named(message["html"]),
            # The pause a Resume button is shown for: a resume from an older page is refused.
            "last_pause": controls.last_pause(broadcast) if broadcast.state == "paused" else "",
        },
    )


@tenant_view()
@email_document_view
def broadcast_sample_html(request: TenantRequest, broadcast_id: int) -> HttpResponse:
    """The sample recipient's HTML (``?sample=``, the template with their values, as it is
    sent) as the page's sandboxed frame: the draft frame's document, policy and headers. 404 for
    another tenant's broadcast as for a missing one, 410 once retention purged the body.

    Of the hash the page's approve button carries (``?hash=``; none: the current one), or a 409:
    the frame loads after the page, and recipients replaced in between would otherwise draw the
    new list's message above the old hash's button."""
    broadcast = _broadcast_or_404(request, broadcast_id)
    if broadcast.body_purged_at is not None:
        return framed_html(None)
    sample = None
    if request.GET.get("hash", broadcast.content_hash) == broadcast.content_hash:
        sample = broadcast_sample(broadcast, _sample_position(request, broadcast))
    if sample is None:
        return email_document_refused(
            _("The broadcast changed since you opened it. Review it again before approving."),
            status=409,
        )
    return framed_html(sample["html"])


@tenant_view()
@require_safe
def broadcast_recipients_csv(
    request: TenantRequest, broadcast_id: int
) -> HttpResponse | StreamingHttpResponse:
    """Every recipient with their variables, as approved: what each of them receives is the
    template filled with their row. Every cell is spreadsheet-safe (agents and uploads wrote
    them).

    The page's link names the hash its approve button carries (``?hash=``): the list is that
    hash's, or a 409 if the broadcast holds another one now. Without it, an agent that swapped
    the recipients between the page and the download, and back before the click, had the
    reviewer check one list and approve another. No ``hash``: the current list."""
    broadcast = _broadcast_or_404(request, broadcast_id)
    shown = request.GET.get("hash", broadcast.content_hash)
    if shown != broadcast.content_hash:
        return HttpResponse(
            _("The broadcast changed since you opened it. Review it again before approving."),
            status=409,
            content_type="text/plain; charset=utf-8",
        )
    names = sorted(broadcast_variable_names(broadcast))
    cells = (
        [str(row), address, *(str(variables.get(name, "")) for name in names)]
        for row, address, variables in broadcast_recipient_rows(broadcast, content_hash=shown)
    )
    header = ["row", "address", *(_variable_column(name) for name in names)]
    response = StreamingHttpResponse(
        csv_lines(header, cells), content_type="text/csv; charset=utf-8"
    )
    response["Content-Disposition"] = (
        f'attachment; filename="broadcast-{broadcast.pk}-recipients.csv"'
    )
    response["Cache-Control"] = "no-store"
    return response


# The download's own columns. A variable of one of these names (in any case: a spreadsheet
# reader does not tell "Address" from "address") is headed as its placeholder, "{{ address }}":
# under its bare name, "row,address,address" gave a reviewer two address columns to tell apart.
DOWNLOAD_COLUMNS = frozenset({"row", "address"})


def _variable_column(name: str) -> str:
    return f"{{{{ {name} }}}}" if name.lower() in DOWNLOAD_COLUMNS else name


def _decide(request: TenantRequest, broadcast_id: int, call, done) -> HttpResponse:
    broadcast = _broadcast_or_404(request, broadcast_id)
    run_decision(request, lambda: call(broadcast), done)
    return redirect("broadcast", request.tenant.slug, broadcast.pk)


@tenant_view(roles=DECIDERS)
@require_POST
def broadcast_approve(request: TenantRequest, broadcast_id: int) -> HttpResponse:
    shown = request.POST.get("content_hash", "")
    return _decide(
        request,
        broadcast_id,
        lambda b: service.broadcast_approve(
            tenant=request.tenant, broadcast_id=b.pk, content_hash=shown, actor=request.user
        ),
        _approved,
    )


def _approved(broadcast) -> str:
    seconds = _undo_seconds_left(broadcast)
    if not seconds:
        return _("Approved: one message per recipient is being sent.")
    return ngettext(
        "Approved: sending starts in %(seconds)d second; you can undo it until then.",
        "Approved: sending starts in %(seconds)d seconds; you can undo it until then.",
        seconds,
    ) % {"seconds": seconds}


@tenant_view(roles=DECIDERS)
@require_POST
def broadcast_reject(request: TenantRequest, broadcast_id: int) -> HttpResponse:
    reason = request.POST.get("reason", "")
    # The content its page showed; a post without it (a hand-made one) names none, and rejects
    # nothing.
    shown = request.POST.get("content_hash", "")
    return _decide(
        request,
        broadcast_id,
        lambda b: service.broadcast_reject(
            tenant=request.tenant,
            broadcast_id=b.pk,
            actor=request.user,
            reason=reason,
            content_hash=shown,
        ),
        _("Rejected: nothing will be sent."),
    )


@tenant_view(roles=DECIDERS)
@require_POST
def broadcast_control(request: TenantRequest, broadcast_id: int, action: str) -> HttpResponse:
    """Pause, resume, cancel, or undo the approval inside its undo window. A pause or a
    cancellation also says how many sends were past their pre-call check: those go out after it
    (``Stopped``)."""

    def resume(**arguments) -> object:
        # With the pause its page showed: one from before the last pause is refused.
        return controls.broadcast_resume(**arguments, seen_pause=request.POST.get("pause", ""))

    calls: dict[str, tuple[Callable[..., object], str, str | None]] = {
        "pause": (
            controls.broadcast_pause,
            _("Paused: no new message goes out."),
            "broadcast_paused",
        ),
        "resume": (resume, _("Resumed."), None),
        "cancel": (
            controls.broadcast_cancel,
            _("Cancelled: the rest will not be sent."),
            "broadcast_cancelled",
        ),
        "undo": (
            controls.broadcast_undo,
            _("Undone: nothing was sent, and the broadcast is back in review."),
            None,
        ),
    }
    if action not in calls:
        raise Http404("No such action")
    call, done, stopped = calls[action]
    return _decide(
        request,
        broadcast_id,
        lambda b: call(tenant=request.tenant, broadcast_id=b.pk, actor=request.user),
        (lambda result: with_sends_in_flight(done, result, stopped)) if stopped else done,
    )
