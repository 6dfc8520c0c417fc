"""The draft page and its decisions: approve, reject, edit."""

from __future__ import annotations

import logging

from django.contrib import messages
from django.core.exceptions import PermissionDenied
from django.http import Http404, HttpResponse
from django.shortcuts import redirect, render
from django.template.loader import render_to_string
from django.urls import reverse
from django.utils.html import format_html
from django.utils.translation import gettext as _
from django.views.decorators.http import require_http_methods, require_POST, require_safe
from django_htmx.http import HttpResponseClientRefresh

from intents import errors, selectors, services
from intents.models import Draft, DraftPresence
from intents.selectors.presence import present_on_drafts
from intents.services.common import not_pending
from intents.services.presence import presence_beat
from review import pages
from review import queries as review
from review.diff import version_diff
from review.forms import (
    ApproveForm,
    EditForm,
    NoteForm,
    RejectForm,
)
from review.views.common import draft_or_404, hx_redirect, left_review, require_right
from tenants.access import DECIDERS, TenantRequest, tenant_view

log = logging.getLogger(__name__)


def _draft_context(request: TenantRequest, draft_id, **extra) -> dict:
    try:
        draft_review = pages.draft_review(
            tenant=request.tenant,
            membership=request.membership,
            user=request.user,
            draft_id=draft_id,
        )
    except errors.NotFound:
        raise Http404("No such draft") from None
    return {**vars(draft_review), "reject_form": RejectForm(), **extra}


@tenant_view()
@require_safe
def draft_detail(request: TenantRequest, draft_id: int) -> HttpResponse:
    # The holder working on it keeps their claim (a no-op for anyone else).
    services.draft_claim_renew(tenant=request.tenant, draft_id=draft_id, actor=request.user)
    # The frame at a phone's width (a query, not a setting: a reload or a link shows the page
    # as wide as the window again).
    look = "phone" if request.GET.get("look") == "phone" else ""
    return render(request, "review/draft.html", _draft_context(request, draft_id, frame_look=look))


@tenant_view(roles=DECIDERS)
@require_POST
def draft_note_add(request: TenantRequest, draft_id: int) -> HttpResponse:
    """An internal note for the other reviewers. A refused note comes back on the page with its
    text kept and what is wrong with it; nothing is saved."""
    draft = draft_or_404(request, draft_id)
    form = NoteForm(request.POST)
    text = form.cleaned_data["text"] if form.is_valid() else ""
    try:
        if not form.is_valid():
            raise errors.InvalidInput(
                "note_unreadable", _("That note could not be read; nothing was saved."), "text"
            )
        services.draft_note_add(
            tenant=request.tenant, draft_id=draft.pk, author=request.user, text=text
        )
    except errors.NoRight as error:
        raise PermissionDenied(error.message) from None
    except errors.DraftError as error:
        context = _draft_context(request, draft.pk, note_text=text, note_error=error.message)
        return render(request, "review/draft.html", context, status=400)
    messages.success(request, _("Note added. Only your team sees it."))
    return redirect(reverse("draft", args=[request.tenant.slug, draft.pk]) + "#notes")


def _refusal(
    request: TenantRequest, draft_id, *, error, seen_version=None, status=409, reject_reason=""
) -> HttpResponse:
    """The page again with what happened; for a stale decision, the diff from what was seen
    (and a refused rejection's reason kept in its box)."""
    if isinstance(error, errors.NotPending):
        error.message = left_review(error)
    context = _draft_context(request, draft_id, refusal=error, reject_reason=reject_reason)
    if seen_version is not None:
        seen = next((v for v in context["detail"].versions if v.number == seen_version), None)
        if seen is not None and seen.number != context["current"].number:
            context["stale_diff"] = version_diff(seen, context["current"])
    if request.htmx:
        return render(request, "review/draft.html#decision", context)
    return render(request, "review/draft.html", context, status=status)


@tenant_view(roles=DECIDERS)
@require_POST
def draft_approve(request: TenantRequest, draft_id: int) -> HttpResponse:
    draft = draft_or_404(request, draft_id)
    try:
        require_right(request, draft.mailbox)
    except PermissionDenied as denied:
        # The right may have been taken away since the page was loaded. The decision box says
        # so: htmx swaps nothing of a bare 403 page, and the click seemed to do nothing.
        return _refusal(request, draft.pk, error=errors.NoRight(message=str(denied)), status=403)
    form = ApproveForm(request.POST)
    if not form.is_valid():
        error = errors.InvalidInput(
            "invalid", _("The approval did not say which version it approves; reload the page.")
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
            messages_seen=form.cleaned_data["messages_seen"],
        )
    except errors.NoRight as error:
        return _refusal(request, draft.pk, error=error, status=403)
    except errors.SecondApproverRequired as error:
        # The page again with the reason (a colleague's version may have made this person the
        # editor since the page was loaded), not a bare 403 page.
        return _refusal(request, draft.pk, error=error, status=403)
    except errors.DraftError as error:
        log.info(
            "intents.ui.approve_refused",
            extra={"tenant_id": request.tenant.pk, "draft_id": draft.pk, "code": error.code},
        )
        if isinstance(error, errors.CustomerWroteAgain) and request.htmx:
            # The whole page again: the thread with the new message, and a form that carries
            # it as seen (the decision box alone would show neither).
            messages.error(request, error.message)
            return HttpResponseClientRefresh()
        return _refusal(request, draft.pk, error=error, seen_version=version)
    outbox_url = reverse("outbox_intent", args=[request.tenant.slug, intent.pk])
    messages.success(
        request,
        format_html(
            '{} <a href="{}">{}</a>.{}',
            _("Approved draft %(draft)s (version %(version)s).")
            % {"draft": draft.pk, "version": version},
            outbox_url,
            _("Follow the send"),
            _undo_offer(request, intent),
        ),
    )
    if form.cleaned_data["next"]:
        following = review.next_pending(
            tenant=request.tenant,
            membership=request.membership,
            after=draft,
            user=request.user,
            approvable=True,
        )
        if following is not None:
            return hx_redirect(request, reverse("draft", args=[request.tenant.slug, following.pk]))
        return hx_redirect(request, reverse("tenant_home", args=[request.tenant.slug]))
    return hx_redirect(request, outbox_url)


def _undo_offer(request: TenantRequest, intent) -> str:
    """The flash's Undo button (with its countdown) while the send waits out its undo window."""
    seconds = pages.undo_seconds_left(intent, intent.approved_at)
    if not seconds:
        return ""
    return render_to_string(
        "review/_undo.html",
        {"slug": request.tenant.slug, "intent_id": intent.pk, "seconds": seconds},
        request=request,
    )


@tenant_view(roles=DECIDERS)
@require_POST
def draft_reject(request: TenantRequest, draft_id: int) -> HttpResponse:
    draft = draft_or_404(request, draft_id)
    # Kept to be copied if the rejection is refused: cut at the box's maxlength, which counts a
    # line break as one character where the browser posts CRLF (the last lines were lost).
    posted = str(request.POST.get("reason", ""))
    typed_reason = posted.replace("\r\n", "\n").replace("\r", "\n")[:2000]
    try:
        require_right(request, draft.mailbox)
    except PermissionDenied as denied:
        # The right was taken away since the page was loaded: the page again with what
        # happened and the reason kept to be copied, not a bare 403 page that drops it.
        no_right = errors.NoRight(message=str(denied))
        return _refusal(request, draft.pk, error=no_right, status=403, reject_reason=typed_reason)
    form = RejectForm(request.POST)
    if not form.is_valid():
        if form.has_error("reason", "required"):
            error = errors.InvalidInput(
                "reason_required", _("Say why you reject this draft."), "reason"
            )
        elif "reason" in form.errors:
            # Too long, or a NUL byte: the form's own words say which ("say why" did not).
            said = str(form.errors["reason"][0])
            error = errors.InvalidInput("reason_invalid", said, "reason")
        else:
            # A rejection names the version it saw; without one, an agent's newer version would
            # be rejected unread (the page always sends it: only a hand-made request lacks it).
            error = errors.InvalidInput(
                "version_required",
                _("This rejection does not say which version it is for: reload the draft."),
                "version",
            )
        return _refusal(request, draft.pk, error=error, status=400, reject_reason=typed_reason)
    try:
        services.draft_reject(
            tenant=request.tenant,
            draft_id=draft.pk,
            reason=form.cleaned_data["reason"],
            actor=request.user,
            version=form.cleaned_data["version"],
        )
    except errors.NoRight as error:
        return _refusal(
            request, draft.pk, error=error, status=403, reject_reason=form.cleaned_data["reason"]
        )
    except errors.DraftError as error:
        return _refusal(
            request,
            draft.pk,
            error=error,
            seen_version=form.cleaned_data["version"],
            reject_reason=form.cleaned_data["reason"],
        )
    messages.success(
        request, _("Rejected draft %(draft)s. The agent sees your reason.") % {"draft": draft.pk}
    )
    following = review.next_pending(
        tenant=request.tenant, membership=request.membership, after=draft
    )
    if following is not None:
        return hx_redirect(request, reverse("draft", args=[request.tenant.slug, following.pk]))
    return hx_redirect(request, reverse("tenant_home", args=[request.tenant.slug]))


def _edit_detail(request: TenantRequest, draft_id) -> selectors.DraftDetail:
    try:
        return selectors.draft_detail(tenant=request.tenant, draft_id=draft_id)
    except errors.NotFound:
        raise Http404("No such draft") from None


def _edit_page(
    request: TenantRequest, detail, form, *, status=200, conflict_diff=None, closed=False
) -> HttpResponse:
    # Read before this page's own first heartbeat: who was already here.
    others = present_on_drafts(
        tenant=request.tenant, draft_ids=[detail.draft.pk], exclude_user=request.user
    ).get(detail.draft.pk, [])
    if detail.draft.in_reply_to:
        # AgentMail sets a reply's subject from the message it answers: a field that looked
        # editable took typing that no save could keep.
        form.fields["subject"].widget.attrs["readonly"] = True
    return render(
        request,
        "review/edit.html",
        {
            "draft": detail.draft,
            "current": detail.current,
            "form": form,
            "conflict_diff": conflict_diff,
            # Nothing this form holds can be saved any more: the page keeps it to be copied.
            "closed": closed,
            "has_html": bool((form["html"].value() or "").strip()),
            # The preview frame shows the version the form was filled from; after a refused
            # save it has no document until the page posts the person's HTML to it (app.js).
            "preview_src": None
            if form.is_bound
            else reverse(
                "draft_version_html",
                args=[request.tenant.slug, detail.draft.pk, detail.current.number],
            ),
            **pages.edit_aside(tenant=request.tenant, draft=detail.draft),
            "present_others": others,
            "editing_others": [p for p in others if p.mode == DraftPresence.Mode.EDITING],
        },
        status=status,
    )


@tenant_view()
@require_POST
def draft_presence(request: TenantRequest, draft_id: int) -> HttpResponse:
    """The pages' heartbeat (htmx, every few seconds): record this person on the draft and
    answer with who else is there. Any member: presence is not a decision."""
    mode = request.GET.get("mode", "")
    try:
        presence_beat(tenant=request.tenant, draft_id=draft_id, user=request.user, mode=mode)
    except errors.NotFound:
        raise Http404("No such draft") from None
    except errors.InvalidInput as error:
        return HttpResponse(error.message, status=400, content_type="text/plain; charset=utf-8")
    others = present_on_drafts(
        tenant=request.tenant, draft_ids=[draft_id], exclude_user=request.user
    ).get(draft_id, [])
    return render(request, "review/_presence.html", {"others": others})


def _edit_conflict(
    request: TenantRequest, draft_id, conflict: errors.VersionConflict
) -> HttpResponse:
    """Someone saved first: nothing was written. Show what they changed since the person's base,
    keep the person's text, and base a deliberate second save on the version now shown."""
    detail = _edit_detail(request, draft_id)
    base = next((v for v in detail.versions if v.number == conflict.base_version), None)
    form = EditForm({**request.POST.dict(), "base_version": detail.current.number})
    form.is_valid()
    form.add_error(
        None,
        f"{conflict.message} "
        + _(
            "Nothing was saved. What changed since version %(base)s is shown above and your "
            "text is kept below: bring in what you need, then save again."
        )
        % {"base": conflict.base_version},
    )
    return _edit_page(
        request,
        detail,
        form,
        status=409,
        conflict_diff=version_diff(base, detail.current) if base else None,
    )


def _edit_refused(
    request: TenantRequest, detail, form: EditForm, message: str, *, status: int
) -> HttpResponse:
    """A save refused for a reason the text cannot fix (the draft left review, the right to
    decide on its mailbox was taken away): the page again with everything the person typed and
    what happened; nothing was saved."""
    form.is_valid()
    form.add_error(
        None,
        f"{message} " + _("Your text was not saved; it is kept below: copy it if you need it."),
    )
    return _edit_page(request, detail, form, status=status, closed=True)


@tenant_view(roles=DECIDERS)
@require_http_methods(["GET", "HEAD", "POST"])
def draft_edit(request: TenantRequest, draft_id: int) -> HttpResponse:
    """The edit form; a save names the version it was based on and the service refuses it, under
    the draft's lock, if that is no longer the current one. Every refused save answers with the
    page and the person's text in it, never a redirect that drops what they typed."""
    detail = _edit_detail(request, draft_id)
    draft = detail.draft
    if request.method == "POST":
        return _edit_save(request, detail)
    require_right(request, draft.mailbox)
    if draft.status != Draft.Status.PENDING:
        messages.error(
            request,
            _("This draft is %(status)s; it cannot be edited.")
            % {"status": draft.get_status_display().lower()},
        )
        return redirect("draft", request.tenant.slug, draft.pk)
    services.draft_claim_renew(tenant=request.tenant, draft_id=draft.pk, actor=request.user)
    return _edit_page(request, detail, EditForm.of_version(detail.current))


def _edit_save(request: TenantRequest, detail) -> HttpResponse:
    draft = detail.draft
    form = EditForm(request.POST)
    try:
        require_right(request, draft.mailbox)
    except PermissionDenied as denied:
        return _edit_refused(request, detail, form, str(denied), status=403)
    if draft.status != Draft.Status.PENDING:
        # Decided between the page's load and this save (a colleague, a bulk approval).
        return _edit_refused(request, detail, form, left_review(not_pending(draft)), status=409)
    services.draft_claim_renew(tenant=request.tenant, draft_id=draft.pk, actor=request.user)
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
        return _edit_refused(request, detail, form, error.message, status=403)
    except errors.NotPending as error:
        # Decided while this save waited for the draft's lock.
        return _edit_refused(
            request, _edit_detail(request, draft.pk), form, left_review(error), status=409
        )
    except errors.VersionConflict as conflict:
        return _edit_conflict(request, draft.pk, conflict)
    except errors.DraftError as error:
        form.add_error(error.field if error.field in form.fields else None, error.message)
        return _edit_page(request, detail, form, status=409 if error.status == 409 else 400)
    messages.success(
        request,
        _("Saved version %(n)s. Check it once more, then approve it.") % {"n": version.number},
        # The editor's kept copy of the text is forgotten on the page that shows this (app.js).
        extra_tags="edit-saved",
    )
    return redirect("draft", request.tenant.slug, draft.pk)
