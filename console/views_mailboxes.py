"""Mailbox pages under /t/<slug>/mailboxes/: every member sees them, admins connect mailboxes
and change their recipient policy and status (provisioning does the work)."""

from __future__ import annotations

from collections.abc import Callable

from django.contrib import messages
from django.http import Http404, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.utils.translation import gettext as _
from django.views.decorators.http import require_http_methods, require_POST, require_safe

from console import selectors
from console.forms_mailboxes import MailboxAssignmentForm, MailboxCreateForm, MailboxPolicyForm
from mailboxes import key_health, provisioning, recovery
from mailboxes.models import Mailbox
from tenants import sudo
from tenants.access import ADMIN_ONLY, TenantRequest, tenant_view
from tenants.send_stops import with_sends_in_flight
from tenants.stale import StaleSave


def _mailbox(request: TenantRequest, mailbox_id: int) -> Mailbox:
    mailbox = selectors.mailbox(request.tenant, mailbox_id)
    if mailbox is None:
        raise Http404("No such mailbox")
    return mailbox


@tenant_view()
@require_safe
def mailbox_list(request: TenantRequest) -> HttpResponse:
    return render(
        request, "console/mailboxes/list.html", {"mailboxes": selectors.mailboxes(request.tenant)}
    )


@tenant_view(roles=ADMIN_ONLY)
@require_http_methods(["GET", "HEAD", "POST"])
def mailbox_create(request: TenantRequest) -> HttpResponse:
    form = MailboxCreateForm(request.POST or None)
    if request.method == "POST" and form.is_valid():
        try:
            mailbox = provisioning.mailbox_create(
                tenant=request.tenant,
                username=form.cleaned_data["username"],
                display_name=form.cleaned_data["display_name"],
                actor=request.user,
            )
        except provisioning.ProvisioningError as exc:
            form.add_error(exc.field, exc.message)
        else:
            messages.success(
                request,
                _("Mailbox %(address)s is connected and ready to send.")
                % {"address": mailbox.address},
            )
            return redirect("mailbox_detail", slug=request.tenant.slug, mailbox_id=mailbox.pk)
    return render(
        request, "console/mailboxes/create.html", {"form": form}, status=400 if form.errors else 200
    )


@tenant_view()
@require_safe
def mailbox_detail(request: TenantRequest, mailbox_id: int) -> HttpResponse:
    mailbox = _mailbox(request, mailbox_id)
    refused = selectors.key_refused_mailboxes(request.tenant, mailbox.pk)
    return render(
        request,
        "console/mailboxes/detail.html",
        {
            "mailbox": mailbox,
            "form": _policy_form(mailbox),
            "assignment_form": _assignment_form(mailbox),
            "key_waiting": refused[0].waiting if refused else None,
        },
    )


def _assignment_form(mailbox: Mailbox, data=None) -> MailboxAssignmentForm:
    return MailboxAssignmentForm(
        data,
        initial={
            "sla_minutes": mailbox.sla_minutes,
            "auto_assign": mailbox.auto_assign,
            "based_on": provisioning.assignment_fingerprint(mailbox),
        },
    )


@tenant_view(roles=ADMIN_ONLY)
@require_POST
def mailbox_assignment(request: TenantRequest, mailbox_id: int) -> HttpResponse:
    mailbox = _mailbox(request, mailbox_id)
    form = _assignment_form(mailbox, request.POST)
    if form.is_valid():
        try:
            provisioning.mailbox_update_assignment(
                tenant=request.tenant,
                mailbox_id=mailbox.pk,
                actor=request.user,
                **form.cleaned_data,
            )
        except StaleSave as conflict:
            return _stale_save_page(request, mailbox.pk, assignment_conflict=conflict.message)
        except provisioning.ProvisioningError as exc:
            form.add_error(exc.field, exc.message)
        else:
            messages.success(request, _("Deadline and assignment saved."))
            return redirect("mailbox_detail", slug=request.tenant.slug, mailbox_id=mailbox.pk)
    context = {"mailbox": mailbox, "form": _policy_form(mailbox), "assignment_form": form}
    return render(request, "console/mailboxes/detail.html", context, status=400)


def _stale_save_page(request: TenantRequest, mailbox_id: int, **conflict: str) -> HttpResponse:
    """A save refused as based on an older page (409): the mailbox page with the settings saved
    now, in fresh forms based on them, and the refusal (``conflict`` or ``assignment_conflict``)
    above its form."""
    current = _mailbox(request, mailbox_id)
    context = {
        "mailbox": current,
        "form": _policy_form(current),
        "assignment_form": _assignment_form(current),
        **conflict,
    }
    return render(request, "console/mailboxes/detail.html", context, status=409)


def _policy_form(mailbox: Mailbox) -> MailboxPolicyForm:
    return MailboxPolicyForm(
        initial={
            "display_name": mailbox.display_name,
            "policy_mode": mailbox.policy_mode,
            "allowed_domains": "\n".join(mailbox.allowed_domains),
            "allowed_addresses": "\n".join(mailbox.allowed_addresses),
            "based_on": provisioning.policy_fingerprint(mailbox),
        }
    )


@tenant_view(roles=ADMIN_ONLY)
@require_POST
def mailbox_policy(request: TenantRequest, mailbox_id: int) -> HttpResponse:
    mailbox = _mailbox(request, mailbox_id)
    form = MailboxPolicyForm(request.POST)
    if not form.is_valid():
        return render(
            request,
            "console/mailboxes/detail.html",
            {"mailbox": mailbox, "form": form, "assignment_form": _assignment_form(mailbox)},
            status=400,
        )
    try:
        stopped = provisioning.mailbox_update_policy(
            tenant=request.tenant,
            mailbox_id=mailbox.pk,
            actor=request.user,
            **form.cleaned_data,
        )
    except StaleSave as conflict:
        return _stale_save_page(request, mailbox.pk, conflict=conflict.message)
    except provisioning.ProvisioningError as exc:
        form.add_error(exc.field, exc.message)
        return render(
            request,
            "console/mailboxes/detail.html",
            {"mailbox": mailbox, "form": form, "assignment_form": _assignment_form(mailbox)},
            status=400,
        )
    messages.success(request, with_sends_in_flight(_("Recipient policy saved."), stopped, "policy"))
    return redirect("mailbox_detail", slug=request.tenant.slug, mailbox_id=mailbox.pk)


@tenant_view(roles=ADMIN_ONLY)
@require_POST
def mailbox_status(request: TenantRequest, mailbox_id: int) -> HttpResponse:
    mailbox = _mailbox(request, mailbox_id)
    wanted = request.POST.get("status", "")
    try:
        stopped = provisioning.mailbox_set_status(
            tenant=request.tenant, mailbox_id=mailbox.pk, status=wanted, actor=request.user
        )
    except provisioning.ProvisioningError as exc:
        messages.error(request, exc.message)
    else:
        done = (
            _("%(address)s is now enabled.")
            if wanted == "active"
            else _("%(address)s is now disabled.")
        ) % {"address": mailbox.address}
        messages.success(request, with_sends_in_flight(done, stopped, "mailbox"))
    return redirect("mailbox_detail", slug=request.tenant.slug, mailbox_id=mailbox.pk)


@tenant_view(roles=ADMIN_ONLY)
@require_POST
def mailbox_retry(request: TenantRequest, mailbox_id: int) -> HttpResponse:
    mailbox = _mailbox(request, mailbox_id)
    return _act_on_mailbox(
        request,
        mailbox,
        lambda: provisioning.mailbox_provision(mailbox=mailbox, actor=request.user),
        _("%(address)s is provisioned."),
    )


@tenant_view(roles=ADMIN_ONLY)
@require_POST
def mailbox_key_check(request: TenantRequest, mailbox_id: int) -> HttpResponse:
    """ "Check the key again": one read with the mailbox's key; if AgentMail accepts it, the
    mailbox's waiting sends go out (mailboxes.key_health)."""
    mailbox = _mailbox(request, mailbox_id)
    return _act_on_mailbox(
        request,
        mailbox,
        lambda: key_health.mailbox_key_check(
            tenant=request.tenant, mailbox_id=mailbox.pk, actor=request.user
        ),
        lambda checked: (
            _("AgentMail accepts the key of %(address)s again; its waiting sends go out now.")
            if checked.is_active
            else _(
                "AgentMail accepts the key of %(address)s again; it stays disabled: nothing is "
                "sent from it until it is enabled."
            )
        ),
    )


def _confirm_page(
    request: TenantRequest, mailbox: Mailbox, *, heading: str, consequence: str, action: str
) -> HttpResponse:
    """The page that asks before an action on the mailbox that cannot be taken back; its form
    posts again with ``confirmed=yes``, Cancel returns to the mailbox."""
    return render(
        request,
        "console/confirm.html",
        {
            "heading": heading,
            "consequence": consequence,
            "action": action,
            "confirmed_field": "confirmed",
            "cancel_url": reverse("mailbox_detail", args=[request.tenant.slug, mailbox.pk]),
        },
    )


@tenant_view(roles=ADMIN_ONLY)
@require_POST
def mailbox_key_replace(request: TenantRequest, mailbox_id: int) -> HttpResponse:
    """ "Replace the key": the button's POST asks first (a page that works without JavaScript);
    the POST it carries, marked confirmed, has AgentMail make a new key for the mailbox and
    delete the old one (mailboxes.key_health). Both need a recent proof (tenants.sudo): the
    first sends the admin to give it before the question, not after their answer."""
    mailbox = _mailbox(request, mailbox_id)
    if held := sudo.confirm_first(
        request, back="mailbox_detail", args=[request.tenant.slug, mailbox.pk]
    ):
        return held
    if request.POST.get("confirmed") != "yes":
        return _confirm_page(
            request,
            mailbox,
            heading=_("Replace the AgentMail key of %(address)s?") % {"address": mailbox.address},
            consequence=_(
                "AgentMail makes a new key for this mailbox and its sends use it from now "
                "on; the old key is deleted at AgentMail, so anything else still using it "
                "stops working. Sends waiting for the key go out, each once."
            ),
            action=_("Replace the key"),
        )
    return _act_on_mailbox(
        request,
        mailbox,
        lambda: key_health.mailbox_key_replace(
            tenant=request.tenant, mailbox_id=mailbox.pk, actor=request.user
        ),
        _("%(address)s sends with a new key now; the old key is deleted at AgentMail."),
    )


@tenant_view(roles=ADMIN_ONLY)
@require_POST
def mailbox_inbox_recover(request: TenantRequest, mailbox_id: int) -> HttpResponse:
    """ "Make the inbox again", for a mailbox whose inbox was deleted at AgentMail: asks first, as
    replacing the key does, and needs a recent proof (tenants.sudo). The service asks AgentMail
    and refuses, changing nothing, while the inbox is still there (mailboxes.recovery)."""
    mailbox = _mailbox(request, mailbox_id)
    if held := sudo.confirm_first(
        request, back="mailbox_detail", args=[request.tenant.slug, mailbox.pk]
    ):
        return held
    if request.POST.get("confirmed") != "yes":
        return _confirm_page(
            request,
            mailbox,
            heading=_("Make the inbox %(address)s again at AgentMail?")
            % {"address": mailbox.address},
            consequence=_(
                "Only if AgentMail no longer has it. AgentMail makes a new, empty inbox at "
                "the same address with a new key: the mail the deleted inbox held is not "
                "in it. Waiting sends go out, each once; a send that may already have gone "
                "out from the deleted inbox goes to a person instead."
            ),
            action=_("Make the inbox again"),
        )
    return _act_on_mailbox(
        request,
        mailbox,
        lambda: recovery.mailbox_inbox_recover(
            tenant=request.tenant, mailbox_id=mailbox.pk, actor=request.user
        ),
        lambda recovered: (
            _("%(address)s has its inbox at AgentMail again; its waiting sends go out now.")
            if recovered.is_active
            else _(
                "%(address)s has its inbox at AgentMail again; it stays disabled: nothing is "
                "sent from it until it is enabled."
            )
        ),
    )


def _act_on_mailbox(
    request: TenantRequest,
    mailbox: Mailbox,
    act: Callable[[], Mailbox],
    success: str | Callable[[Mailbox], str],
) -> HttpResponse:
    """Run an admin's action on the mailbox (a call to AgentMail behind it); its refusal or
    ``success`` (with the address) as a message, back to the mailbox's page. A ``success`` that
    depends on the mailbox's state is a function of the mailbox ``act`` returned: the one read
    before the call may have been disabled or enabled by another admin while AgentMail was
    asked."""
    try:
        done = act()
    except provisioning.ProvisioningError as exc:
        messages.error(request, exc.message)
    else:
        if callable(success):
            success = success(done)
        messages.success(request, success % {"address": mailbox.address})
    return redirect("mailbox_detail", slug=request.tenant.slug, mailbox_id=mailbox.pk)
