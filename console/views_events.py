"""Agent events for tenant admins (Console → Agent events): endpoints (add with the secret shown
once, rotate it, disable, enable, delete) and the recent deliveries, one of which may be resent.
The writes are intents.services.event_endpoints; another tenant's ids answer 404."""

from __future__ import annotations

from django.contrib import messages
from django.http import Http404, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.utils import timezone
from django.utils.translation import gettext as _
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_http_methods, require_POST, require_safe

from console.forms_events import EndpointForm
from intents.selectors.events import event_endpoint, event_endpoints, recent_deliveries
from intents.services import event_endpoints as services
from tenants import sudo
from tenants.access import ADMIN_ONLY, TenantRequest, tenant_view
from tenants.once_forms import AlreadySubmitted, new_form_id
from tenants.services import AdminError
from tenants.stale import StaleSave
from tenants.templatetags.zones import zoned


def _page(request: TenantRequest, form: EndpointForm, status: int = 200) -> HttpResponse:
    return render(
        request,
        "console/agent_events.html",
        {
            "endpoints": list(event_endpoints(request.tenant)),
            "deliveries": recent_deliveries(request.tenant),
            "form": form,
        },
        status=status,
    )


def _back(request: TenantRequest) -> HttpResponse:
    return redirect("agent_events", slug=request.tenant.slug)


def _secret_page(request: TenantRequest, endpoint, secret: str, rotated: bool) -> HttpResponse:
    # The only responses that carry a secret: not cached, never redirected to.
    response = render(
        request,
        "console/agent_events_secret.html",
        {"endpoint": endpoint, "secret": secret, "rotated": rotated},
    )
    response["Cache-Control"] = "no-store"
    return response


def _already_done(request: TenantRequest, receipt) -> HttpResponse:
    """A second post of the form that added an endpoint or rotated its secret (a second click
    while the first answer was on its way): the browser shows this answer, not the first one's
    secret, so it says what the first click did and how to get a secret the admin can copy."""
    return render(
        request,
        "console/agent_events_already.html",
        {
            "endpoint": event_endpoint(request.tenant, receipt.object_id),
            "receipt": receipt,
            "rotated": receipt.action == "agent_events.secret_rotated",
        },
        status=409,
    )


@tenant_view(roles=ADMIN_ONLY)
@require_safe
def agent_events(request: TenantRequest) -> HttpResponse:
    return _page(request, EndpointForm(tenant=request.tenant))


@tenant_view(roles=ADMIN_ONLY)
@require_http_methods(["GET", "HEAD", "POST"])
@never_cache
def endpoint_new(request: TenantRequest) -> HttpResponse:
    if request.method in ("GET", "HEAD"):
        return _back(request)
    # Where the tenant's events go, and the secret that signs them (tenants.sudo).
    if held := sudo.confirm_first(request, back="agent_events", args=[request.tenant.slug]):
        return held
    form = EndpointForm(request.POST, tenant=request.tenant)
    if not form.is_valid():
        return _page(request, form, status=422)
    mailbox = form.cleaned_data["mailbox"]
    try:
        endpoint, secret = services.endpoint_create(
            tenant=request.tenant,
            url=form.cleaned_data["url"],
            event_types=form.cleaned_data["event_types"],
            mailbox_id=mailbox.pk if mailbox else None,
            description=form.cleaned_data["description"],
            actor=request.user,
            form_id=form.cleaned_data["form_id"],
        )
    except AlreadySubmitted as done:
        return _already_done(request, done.receipt)
    except AdminError as exc:
        form.add_error(exc.field if exc.field in form.fields else None, exc.message)
        return _page(request, form, status=422)
    return _secret_page(request, endpoint, secret, rotated=False)


def _endpoint_or_404(request: TenantRequest, endpoint_id):
    endpoint = event_endpoint(request.tenant, endpoint_id)
    if endpoint is None:
        raise Http404("No such endpoint")
    return endpoint


def _confirm(
    request: TenantRequest,
    endpoint,
    heading: str,
    consequence: str,
    action: str,
    *,
    based_on: str = "",
    form_id: str = "",
    refusal: str = "",
    status: int = 200,
):
    return render(
        request,
        "console/confirm.html",
        {
            "heading": heading % {"url": endpoint.url_shown},
            "consequence": consequence,
            "action": action,
            "cancel_url": reverse("agent_events", args=[request.tenant.slug]),
            "based_on": based_on,
            "form_id": form_id,
            "refusal": refusal,
        },
        status=status,
    )


def _rotate_question(request: TenantRequest, endpoint_id, *, refusal: str = "", status: int = 200):
    """The question before a rotation, with what rotating does now; its answer carries the
    rotation it saw (``based_on``)."""
    consequence = _(
        "A new secret is shown once. For 24 hours each delivery carries a signature "
        "with the old secret too, so the receiver can switch without losing one."
    )
    endpoint = _endpoint_or_404(request, endpoint_id)
    if endpoint.previous_secret_still_signs():
        # Two secrets sign at most: a second rotation inside the first one's 24 hours ends
        # the oldest at once, which the page promised for 24 hours.
        consequence += " " + _(
            "The secret replaced by the last rotation still signs until %(until)s; "
            "rotating again stops it now."
        ) % {"until": zoned(timezone.localtime(endpoint.previous_secret_expires_at))}
    return _confirm(
        request,
        endpoint,
        _("Rotate the signing secret of %(url)s?"),
        consequence,
        _("Rotate the secret"),
        based_on=services.endpoint_rotation_fingerprint(endpoint),
        form_id=new_form_id(),
        refusal=refusal,
        status=status,
    )


@tenant_view(roles=ADMIN_ONLY)
@require_http_methods(["GET", "HEAD", "POST"])
@never_cache
def endpoint_rotate(request: TenantRequest, endpoint_id: int) -> HttpResponse:
    """The question page asks for the proof (tenants.sudo) before it is answered, so that the
    secret follows the one click on it; its POST asks again if the proof ran out meanwhile."""
    if held := sudo.confirm_first(
        request, back="agent_events_rotate", args=[request.tenant.slug, endpoint_id]
    ):
        return held
    if request.method in ("GET", "HEAD"):
        return _rotate_question(request, endpoint_id)
    try:
        endpoint, secret = services.endpoint_rotate_secret(
            tenant=request.tenant,
            endpoint_id=endpoint_id,
            actor=request.user,
            # A post without it (an older release's page, a hand-made request) is refused as
            # stale (changed_since of nothing), and asked again below.
            based_on=request.POST.get("based_on", ""),
            form_id=request.POST.get("form_id", ""),
        )
    except AlreadySubmitted as done:
        return _already_done(request, done.receipt)
    except AdminError:
        raise Http404("No such endpoint") from None
    except StaleSave as stale:
        # Asked again, with what rotating does now (it may stop a secret at once).
        return _rotate_question(request, endpoint_id, refusal=stale.message, status=409)
    return _secret_page(request, endpoint, secret, rotated=True)


@tenant_view(roles=ADMIN_ONLY)
@require_http_methods(["GET", "HEAD", "POST"])
def endpoint_delete(request: TenantRequest, endpoint_id: int) -> HttpResponse:
    if request.method in ("GET", "HEAD"):
        return _confirm(
            request,
            _endpoint_or_404(request, endpoint_id),
            _("Delete the endpoint %(url)s?"),
            _("Events stop going there at once and its deliveries are forgotten."),
            _("Delete the endpoint"),
        )
    try:
        services.endpoint_delete(tenant=request.tenant, endpoint_id=endpoint_id, actor=request.user)
    except AdminError:
        raise Http404("No such endpoint") from None
    messages.success(request, _("Endpoint deleted."))
    return _back(request)


@tenant_view(roles=ADMIN_ONLY)
@require_POST
def endpoint_switch(request: TenantRequest, endpoint_id: int, to: str) -> HttpResponse:
    """Disable (``to="off"``) or enable (``to="on"``) an endpoint. Enabling asks for the proof
    (tenants.sudo), as adding one does: it starts the tenant's events flowing to a URL again,
    one an admin may have switched off because it was no longer theirs."""
    write = services.endpoint_enable if to == "on" else services.endpoint_disable
    if event_endpoint(request.tenant, endpoint_id) is None:
        raise Http404("No such endpoint")
    if to == "on" and (
        held := sudo.confirm_first(request, back="agent_events", args=[request.tenant.slug])
    ):
        return held
    try:
        write(tenant=request.tenant, endpoint_id=endpoint_id, actor=request.user)
    except AdminError as exc:
        messages.error(request, exc.message)
    else:
        messages.success(request, _("Endpoint enabled.") if to == "on" else _("Endpoint disabled."))
    return _back(request)


@tenant_view(roles=ADMIN_ONLY)
@require_POST
def delivery_resend(request: TenantRequest, delivery_id: int) -> HttpResponse:
    try:
        services.delivery_resend(tenant=request.tenant, delivery_id=delivery_id, actor=request.user)
    except AdminError as exc:
        if exc.code == "not_found":
            raise Http404("No such delivery") from None
        messages.error(request, exc.message)
    else:
        messages.success(request, _("The event is queued again for this endpoint."))
    return _back(request)
