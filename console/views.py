"""Tenant administration pages under /t/<slug>/admin/: members, policies, suppressions,
webhook status, the audit log and the health panel. Admins only; views stay thin."""

from __future__ import annotations

import json

from django import forms
from django.conf import settings
from django.contrib import messages
from django.http import Http404, HttpResponse, StreamingHttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.utils import timezone
from django.utils.translation import gettext as _
from django.utils.translation import gettext_lazy, ngettext
from django.views.decorators.http import require_http_methods, require_POST, require_safe

from common.csv_cells import csv_lines
from config.bounded import ReadTimedOut, bounded_reads
from console import audit_words, selectors
from console import services as console_services
from console.forms import (
    AuditFilterForm,
    InviteForm,
    OwnDomainsForm,
    PoliciesForm,
    RightsForm,
    RoleForm,
    SuppressionAddForm,
    SuppressionRemoveForm,
)
from console.member_impact import deciding_impact
from console.policies_page import policies_page
from tenants import invitations, services, sudo
from tenants import policies as tenant_policies
from tenants.access import ADMIN_ONLY, TenantRequest, tenant_view
from tenants.forms import AwayForm
from tenants.models import Membership
from tenants.send_stops import Stopped, with_sends_in_flight
from tenants.stale import StaleSave

AUDIT_PAGE = 100


def _slug(request: TenantRequest) -> str:
    return request.tenant.slug


def _member_or_404(request: TenantRequest, membership_id: int) -> Membership:
    membership = selectors.member(request.tenant, membership_id)
    if membership is None:
        raise Http404("No such member")
    return membership


def _refuse(form: forms.Form, error: services.AdminError) -> None:
    form.add_error(error.field if error.field in form.fields else None, error.message)


def _health(tenant) -> selectors.Health | None:
    """The health figures, or None when the database did not give them in time (a table locked
    by a migration, an overloaded server): the page says so instead of waiting with it."""
    try:
        with bounded_reads():
            return selectors.health(tenant)
    except ReadTimedOut:
        return None


@tenant_view(roles=ADMIN_ONLY)
@require_safe
def admin_home(request: TenantRequest) -> HttpResponse:
    template = "console/home.html"
    if request.htmx:
        template += "#health"
    context: dict[str, object] = {
        "health": _health(request.tenant),
        "ops_query_timeout": f"{settings.OPS_QUERY_TIMEOUT_SECONDS:g}",
    }
    if not request.htmx:
        context["setup"] = selectors.setup_progress(request.tenant)
    return render(request, template, context)


def _members_page(
    request: TenantRequest, *, invite_form=None, invitation=None, link=None, status=200
):
    return render(
        request,
        "console/members.html",
        {
            "members": [(m, selectors.member_status(m)) for m in selectors.members(request.tenant)],
            "invitations": selectors.invitations(request.tenant),
            "invite_form": invite_form or InviteForm(mailboxes=selectors.mailboxes(request.tenant)),
            "invitation": invitation,
            "link": link,
        },
        status=status,
    )


@tenant_view(roles=ADMIN_ONLY)
@require_http_methods(["GET", "HEAD", "POST"])
def members(request: TenantRequest) -> HttpResponse:
    if request.method in ("GET", "HEAD"):
        return _members_page(request)
    # An invitation's link is a way in that outlives this session, whatever the role
    # (tenants.sudo).
    if held := sudo.confirm_first(request, back="admin_members", args=[_slug(request)]):
        return held
    form = InviteForm(request.POST, mailboxes=selectors.mailboxes(request.tenant))
    if not form.is_valid():
        return _members_page(request, invite_form=form, status=400)
    try:
        invitation, token = invitations.invitation_create(
            tenant=request.tenant,
            email=form.cleaned_data["email"],
            full_name=form.cleaned_data["full_name"],
            role=form.cleaned_data["role"],
            approve_all_mailboxes=form.cleaned_data["approve"] == InviteForm.ALL,
            mailbox_ids=[m.pk for m in form.cleaned_data["mailboxes"]],
            actor=request.user,
        )
    except services.AdminError as error:
        _refuse(form, error)
        return _members_page(request, invite_form=form, status=400)
    link = request.build_absolute_uri(reverse("invitation_open", args=[token]))
    # Rendered, not redirected: the link is shown this once and only its digest is stored.
    response = _members_page(request, invitation=invitation, link=link)
    response["Cache-Control"] = "no-store"
    return response


@tenant_view(roles=ADMIN_ONLY)
@require_POST
def invitation_revoke(request: TenantRequest, invitation_id: int) -> HttpResponse:
    try:
        invitation = invitations.invitation_revoke(
            tenant=request.tenant, invitation_id=invitation_id, actor=request.user
        )
    except services.AdminError as error:
        if error.code == "not_found":
            raise Http404(error.message) from None
        messages.error(request, error.message)
    else:
        messages.success(
            request,
            _("The invitation of %(email)s no longer works.") % {"email": invitation.email},
        )
    return redirect("admin_members", _slug(request))


def _member_page(
    request: TenantRequest,
    membership,
    *,
    role_form=None,
    role_conflict: str = "",
    rights_form=None,
    rights_conflict: str = "",
    status=200,
):
    mailboxes = selectors.mailboxes(request.tenant)
    return render(
        request,
        "console/member.html",
        {
            "member": membership,
            "status": selectors.member_status(membership),
            "role_form": role_form
            or RoleForm(
                initial={
                    "role": membership.role,
                    "based_on": services.member_role_fingerprint(membership),
                }
            ),
            "role_conflict": role_conflict,
            "rights_form": rights_form
            or RightsForm(
                mailboxes=mailboxes,
                initial={
                    "approve_all_mailboxes": membership.approve_all_mailboxes,
                    "mailboxes": list(membership.approve_mailboxes.all()),
                    "based_on": services.member_rights_fingerprint(membership),
                },
            ),
            "rights_conflict": rights_conflict,
            "is_self": membership.user_id == request.user.pk,
            "deciding_impact": deciding_impact(request.tenant, membership),
        },
        status=status,
    )


@tenant_view(roles=ADMIN_ONLY)
@require_safe
def member_detail(request: TenantRequest, membership_id: int) -> HttpResponse:
    return _member_page(request, _member_or_404(request, membership_id))


@tenant_view(roles=ADMIN_ONLY)
@require_POST
def member_role(request: TenantRequest, membership_id: int) -> HttpResponse:
    membership = _member_or_404(request, membership_id)
    form = RoleForm(request.POST)
    if form.is_valid():
        if _raises(membership, form.cleaned_data["role"]) and (
            held := sudo.confirm_first(
                request, back="admin_member", args=[_slug(request), membership.pk]
            )
        ):
            return held
        try:
            stopped = services.member_set_role(
                tenant=request.tenant,
                membership_id=membership.pk,
                role=form.cleaned_data["role"],
                actor=request.user,
                based_on=form.cleaned_data["based_on"],
            )
        except StaleSave as conflict:
            # The role saved now, in a fresh form based on it.
            current = _member_or_404(request, membership.pk)
            return _member_page(request, current, role_conflict=conflict.message, status=409)
        except services.AdminError as error:
            _refuse(form, error)
        else:
            role = Membership.Role(form.cleaned_data["role"]).label
            if _is_own(request, membership) and stopped.changed.role != Membership.Role.ADMIN:
                # Their own member page is an admin page, closed to them from now on.
                done = _("You are now %(role)s in %(tenant)s; the admin pages are for admins.") % {
                    "role": role,
                    "tenant": request.tenant.name,
                }
                messages.success(request, with_sends_in_flight(done, stopped, "own_approvals"))
                return redirect("tenant_home", _slug(request))
            done = _("%(email)s is now %(role)s.") % {"email": membership.user.email, "role": role}
            messages.success(request, with_sends_in_flight(done, stopped, "approver"))
            return redirect("admin_member", _slug(request), membership.pk)
    return _member_page(request, membership, role_form=form, status=400)


@tenant_view(roles=ADMIN_ONLY)
@require_POST
def member_away(request: TenantRequest, membership_id: int) -> HttpResponse:
    form = AwayForm(request.POST)
    if not form.is_valid():
        membership = _member_or_404(request, membership_id)
        messages.error(request, str(form.errors["away"][0]))
        return _member_page(request, membership, status=400)
    away = form.cleaned_data["away"] == "1"
    try:
        membership = services.member_set_away(
            tenant=request.tenant, membership_id=membership_id, away=away, actor=request.user
        )
    except services.AdminError as error:
        if error.code == "not_found":
            raise Http404(error.message) from None
        messages.error(request, error.message)
        return redirect("admin_members", request.tenant.slug)
    name = membership.user.display_name
    if away:
        messages.success(request, _("%(name)s is marked away.") % {"name": name})
    else:
        messages.success(request, _("%(name)s is back.") % {"name": name})
    return redirect("admin_member", request.tenant.slug, membership.pk)


_RANK = {Membership.Role.VIEWER: 0, Membership.Role.APPROVER: 1, Membership.Role.ADMIN: 2}


def _raises(membership: Membership, role: str) -> bool:
    """A higher role is lasting power for whoever holds that account (tenants.sudo); a lower one
    is not."""
    return _RANK[Membership.Role(role)] > _RANK[Membership.Role(membership.role)]


def _widens(membership: Membership, mailbox_ids: set[int]) -> bool:
    """Whether these approve rights reach a mailbox the member cannot approve for now: lasting
    power, like a higher role (tenants.sudo). Fewer rights are not."""
    if membership.approve_all_mailboxes:
        return False
    return not mailbox_ids <= set(membership.approve_mailboxes.values_list("pk", flat=True))


@tenant_view(roles=ADMIN_ONLY)
@require_POST
def member_rights(request: TenantRequest, membership_id: int) -> HttpResponse:
    membership = _member_or_404(request, membership_id)
    form = RightsForm(request.POST, mailboxes=selectors.mailboxes(request.tenant))
    if form.is_valid():
        widened = form.cleaned_data["approve_all_mailboxes"] or _widens(
            membership, {m.pk for m in form.cleaned_data["mailboxes"]}
        )
        if widened and (
            held := sudo.confirm_first(
                request, back="admin_member", args=[_slug(request), membership.pk]
            )
        ):
            return held
        try:
            stopped = services.member_set_mailbox_rights(
                tenant=request.tenant,
                membership_id=membership.pk,
                approve_all_mailboxes=form.cleaned_data["approve_all_mailboxes"],
                mailbox_ids=[m.pk for m in form.cleaned_data["mailboxes"]],
                actor=request.user,
                based_on=form.cleaned_data["based_on"],
            )
        except StaleSave as conflict:
            # The rights saved now, in a fresh form based on them.
            current = _member_or_404(request, membership.pk)
            return _member_page(request, current, rights_conflict=conflict.message, status=409)
        except services.AdminError as error:
            _refuse(form, error)
        else:
            done = _("Approve rights of %(email)s saved.") % {"email": membership.user.email}
            messages.success(request, with_sends_in_flight(done, stopped, "rights"))
            return redirect("admin_member", _slug(request), membership.pk)
    return _member_page(request, membership, rights_form=form, status=400)


def _is_own(request: TenantRequest, membership: Membership) -> bool:
    return membership.user_id == request.user.pk


def _member_action(
    request: TenantRequest, membership_id, service, done, own_done=None
) -> HttpResponse:
    """``done`` is a lazy message with %(email)s, translated when the person reads it.
    ``own_done``: for a change that takes the tenant away from an admin acting on their own
    membership (leaving it), a lazy message with %(tenant)s; they go to their start page, as
    the member page is closed to them from now on (and their session may have ended with it)."""
    membership = _member_or_404(request, membership_id)
    try:
        result = service(tenant=request.tenant, membership_id=membership.pk, actor=request.user)
    except services.AdminError as error:
        messages.error(request, error.message)
    else:
        if own_done is not None and _is_own(request, membership):
            said = str(own_done % {"tenant": request.tenant.name})
            if isinstance(result, Stopped):
                said = with_sends_in_flight(said, result, "own_approvals")
            messages.success(request, said)
            return redirect("home")
        said = str(done % {"email": membership.user.email})
        if isinstance(result, Stopped):
            said = with_sends_in_flight(said, result, "approver")
        messages.success(request, said)
    return redirect("admin_member", _slug(request), membership.pk)


@tenant_view(roles=ADMIN_ONLY)
@require_http_methods(["GET", "HEAD", "POST"])
def member_deactivate(request: TenantRequest, membership_id: int) -> HttpResponse:
    """GET asks first (a page that works without JavaScript); the POST it carries deactivates."""
    if request.method in ("GET", "HEAD"):
        membership = _member_or_404(request, membership_id)
        if not membership.is_active:
            return redirect("admin_member", _slug(request), membership.pk)
        is_self = membership.user_id == request.user.pk
        names = {"who": membership.user.display_name, "tenant": request.tenant.name}
        return render(
            request,
            "console/confirm.html",
            {
                "heading": _("Leave %(tenant)s?") % names
                if is_self
                else _("Deactivate %(who)s?") % names,
                "consequence": _(
                    "From the next request %(who)s can no longer open %(tenant)s. Sends they "
                    "already approved are checked again before sending and stop if nobody with "
                    "the right approved them. You can reactivate them later."
                )
                % names
                + "".join(f" {said}" for said in deciding_impact(request.tenant, membership))
                + _still_working(request, membership),
                "action": _("Leave this tenant") if is_self else _("Deactivate"),
                "cancel_url": reverse("admin_member", args=[_slug(request), membership.pk]),
            },
        )
    return _member_action(
        request,
        membership_id,
        services.member_deactivate,
        gettext_lazy("%(email)s can no longer open this tenant."),
        own_done=gettext_lazy("You left %(tenant)s."),
    )


def _still_working(request: TenantRequest, membership) -> str:
    """What the person set up that goes on without them: agent tokens and agent-event endpoints
    belong to the tenant, so deactivating their maker stops neither (said, so it is decided)."""
    tokens, endpoints = selectors.still_working_for(request.tenant, membership.user)
    if not tokens and not endpoints:
        return ""
    return " " + _(
        "Still working after this: %(tokens)s and %(endpoints)s they created. Revoke or turn "
        "them off on the agent tokens and agent events pages if they should stop."
    ) % {
        "tokens": ngettext("%(n)d agent token", "%(n)d agent tokens", tokens) % {"n": tokens},
        "endpoints": ngettext(
            "%(n)d agent-event endpoint", "%(n)d agent-event endpoints", endpoints
        )
        % {"n": endpoints},
    }


@tenant_view(roles=ADMIN_ONLY)
@require_POST
def member_reactivate(request: TenantRequest, membership_id: int) -> HttpResponse:
    # Back with the role and approve rights they had, an admin's included: a stolen session that
    # could not raise a role could otherwise deactivate and reactivate its way to it (tenants.sudo).
    if held := sudo.confirm_first(
        request, back="admin_member", args=[_slug(request), membership_id]
    ):
        return held
    return _member_action(
        request,
        membership_id,
        services.member_reactivate,
        gettext_lazy("%(email)s is active again."),
    )


@tenant_view(roles=ADMIN_ONLY)
@require_http_methods(["GET", "HEAD", "POST"])
def own_domains(request: TenantRequest) -> HttpResponse:
    """The organisation's own mail domains, a form of its own on the policies page."""
    if request.method in ("GET", "HEAD"):
        return redirect("admin_policies", request.tenant.slug)
    form = OwnDomainsForm(request.POST)
    if not form.is_valid():
        return policies_page(request, domains_form=form, status=400)
    try:
        tenant_policies.tenant_set_own_domains(
            tenant=request.tenant,
            domains=form.cleaned_data["own_domains"],
            actor=request.user,
            based_on=form.cleaned_data["based_on"],
        )
    except StaleSave as conflict:
        request.tenant.refresh_from_db()
        return policies_page(request, domains_conflict=conflict.message, status=409)
    messages.success(request, _("Your organisation's domains are saved."))
    return redirect("admin_policies", request.tenant.slug)


@tenant_view(roles=ADMIN_ONLY)
@require_http_methods(["GET", "HEAD", "POST"])
def policies(request: TenantRequest) -> HttpResponse:
    tenant = request.tenant
    if request.method in ("GET", "HEAD"):
        return policies_page(request)
    form = PoliciesForm(request.POST)
    if form.is_valid():
        try:
            stopped = tenant_policies.tenant_update_policies(
                tenant=tenant, actor=request.user, **form.cleaned_data
            )
        except StaleSave as conflict:
            tenant.refresh_from_db()
            return policies_page(request, conflict=conflict.message, status=409)
        except services.AdminError as error:
            _refuse(form, error)
        else:
            said = with_sends_in_flight(_("Policies saved."), stopped, "second_approver")
            messages.success(request, said)
            return redirect("admin_policies", tenant.slug)
    return policies_page(request, form=form, status=400)


@tenant_view(roles=ADMIN_ONLY)
@require_safe
def recipients(request: TenantRequest) -> HttpResponse:
    return render(
        request,
        "console/recipients.html",
        {"mailboxes": selectors.mailboxes(request.tenant)},
    )


def _suppressions_page(request: TenantRequest, *, add_form=None, status=200):
    search = request.GET.get("q", "")[:254]
    return render(
        request,
        "console/suppressions.html",
        {
            "suppressions": selectors.suppression_rows(request.tenant, search),
            "q": search,
            "add_form": add_form or SuppressionAddForm(),
            "remove_form": SuppressionRemoveForm(),
        },
        status=status,
    )


@tenant_view(roles=ADMIN_ONLY)
@require_safe
def suppressions(request: TenantRequest) -> HttpResponse:
    return _suppressions_page(request)


@tenant_view(roles=ADMIN_ONLY)
@require_POST
def suppression_add(request: TenantRequest) -> HttpResponse:
    form = SuppressionAddForm(request.POST)
    if form.is_valid():
        try:
            stopped = console_services.suppression_add(
                tenant=request.tenant,
                address=form.cleaned_data["address"],
                note=form.cleaned_data["note"],
                actor=request.user,
            )
        except services.AdminError as error:
            _refuse(form, error)
        else:
            done = _("%(address)s will not receive mail from us.") % {
                "address": stopped.changed.address
            }
            messages.success(request, with_sends_in_flight(done, stopped, "address"))
            return redirect("admin_suppressions", _slug(request))
    return _suppressions_page(request, add_form=form, status=400)


@tenant_view(roles=ADMIN_ONLY)
@require_POST
def suppression_remove(request: TenantRequest, suppression_id: int) -> HttpResponse:
    if not selectors.suppressions(request.tenant).filter(pk=suppression_id).exists():
        return _removed_already(request, suppression_id)
    form = SuppressionRemoveForm(request.POST)
    if not form.is_valid():
        messages.error(request, _("Say why this address may receive mail again."))
        return redirect("admin_suppressions", _slug(request))
    try:
        console_services.suppression_remove(
            tenant=request.tenant,
            suppression_id=suppression_id,
            reason=form.cleaned_data["reason"],
            actor=request.user,
        )
    except services.AdminError as error:
        if error.code == "not_found":
            return _removed_already(request, suppression_id)
        messages.error(request, error.message)
    else:
        messages.success(request, _("Removed from the suppression list."))
    return redirect("admin_suppressions", _slug(request))


def _removed_already(request: TenantRequest, suppression_id: int) -> HttpResponse:
    """The answer to a removal of an address that is not listed: another admin's removal from
    the same list (both pages offered it) is said, naming the address; any other id, another
    tenant's too, is a 404."""
    address = selectors.suppression_removed(request.tenant, suppression_id)
    if address is None:
        raise Http404("No such suppressed address")
    messages.error(
        request,
        _("%(address)s was removed from the suppression list already; nothing was changed.")
        % {"address": address},
    )
    return redirect("admin_suppressions", _slug(request))


@tenant_view(roles=ADMIN_ONLY)
@require_safe
def webhooks(request: TenantRequest) -> HttpResponse:
    return render(
        request,
        "console/webhooks.html",
        {
            "endpoints": selectors.webhook_endpoints(request.tenant),
            "event_states": selectors.webhook_event_states(request.tenant),
            "health": _health(request.tenant),
        },
    )


def _audit_filter(request: TenantRequest) -> tuple[AuditFilterForm, selectors.AuditFilter]:
    form = AuditFilterForm(request.GET or None)
    if form.is_bound and form.is_valid():
        return form, selectors.AuditFilter(**form.cleaned_data)
    return form, selectors.AuditFilter()


@tenant_view(roles=ADMIN_ONLY)
@require_safe
def audit(request: TenantRequest) -> HttpResponse:
    form, audit_filter = _audit_filter(request)
    rows = list(selectors.audit_log(request.tenant, audit_filter)[: AUDIT_PAGE + 1])
    more = len(rows) > AUDIT_PAGE
    rows = rows[:AUDIT_PAGE]
    next_query = None
    if more:
        params = request.GET.copy()
        last = rows[-1]
        params["before"] = last["created_at"].isoformat()
        params["before_src"] = last["src"]
        params["before_id"] = str(last["id"])
        next_query = params.urlencode()
    export = request.GET.copy()
    # The export holds what the page shows: without the filters the page ignored.
    for name in ("before", "before_src", "before_id", *form.errors):
        export.pop(name, None)
    return render(
        request,
        "console/audit.html",
        {
            "form": form,
            "rows": audit_words.audit_lines(request.tenant, rows),
            "next_query": next_query,
            "export_query": export.urlencode(),
        },
    )


@tenant_view(roles=ADMIN_ONLY)
@require_safe
def audit_csv(request: TenantRequest) -> HttpResponse | StreamingHttpResponse:
    form, audit_filter = _audit_filter(request)
    if form.errors:
        # The page may show everything beside its warning; a file cannot carry one, and the
        # whole log saved as, say, one send's record (send=-1) was taken for that record.
        return _audit_csv_refused(form)
    rows = selectors.audit_log(request.tenant, audit_filter).iterator(chunk_size=2000)
    # Every cell is made safe: actor names, object types and even actions can carry outsiders'
    # text.
    cells = (
        [
            row["created_at"].isoformat(),
            row["src"],
            row["action"],
            row["actor_name"],
            row["obj"],
            row["transition"] if row["transition"].strip() != "→" else "",
            row["reason"],
            json.dumps(row["data"], sort_keys=True),
        ]
        for row in rows
    )
    header = ["time", "source", "action", "actor", "object", "transition", "reason", "data"]
    stamp = timezone.now().strftime("%Y%m%d-%H%M%S")
    response = StreamingHttpResponse(
        csv_lines(header, cells), content_type="text/csv; charset=utf-8"
    )
    response["Content-Disposition"] = (
        f'attachment; filename="audit-{request.tenant.slug}-{stamp}.csv"'
    )
    return response


def _audit_csv_refused(form: AuditFilterForm) -> HttpResponse:
    fields = "; ".join(
        f"{form.fields[name].label if name in form.fields else ''}: {' '.join(map(str, errors))}"
        for name, errors in form.errors.items()
    )
    return HttpResponse(
        _("Some filters were not understood, so nothing was exported: %(fields)s")
        % {"fields": fields},
        status=400,
        content_type="text/plain; charset=utf-8",
    )
