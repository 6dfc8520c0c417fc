"""Agent-token administration for tenant admins: list, create (plaintext shown once), revoke."""

from __future__ import annotations

from datetime import timedelta

from django.contrib import messages
from django.http import Http404, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.utils import timezone
from django.utils.translation import gettext as _
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_http_methods, require_safe

from console import selectors
from console.forms import TokenForm
from tenants import sudo
from tenants.access import ADMIN_ONLY, TenantRequest, tenant_view
from tenants.once_forms import AlreadySubmitted
from tenants.tokens import TokenError, token_create, token_revoke


def _page(request: TenantRequest, form: TokenForm, status: int = 200) -> HttpResponse:
    return render(
        request,
        "console/tokens.html",
        {"rows": selectors.token_rows(request.tenant), "form": form},
        status=status,
    )


@tenant_view(roles=ADMIN_ONLY)
@require_safe
def token_list(request: TenantRequest) -> HttpResponse:
    return _page(request, TokenForm(tenant=request.tenant))


@tenant_view(roles=ADMIN_ONLY)
@require_http_methods(["GET", "HEAD", "POST"])
@never_cache
def token_new(request: TenantRequest) -> HttpResponse:
    if request.method in ("GET", "HEAD"):
        # The created page is this URL's POST answer, so a reload or a bookmark lands here: the
        # form is on the list, and the plaintext is never shown again.
        messages.info(
            request,
            _(
                "A token is shown only once, right after it is created. "
                "Create a new one below; revoke one whose secret you lost."
            ),
        )
        return redirect("token_list", slug=request.tenant.slug)
    # A token is API access that outlives this session (tenants.sudo).
    if held := sudo.confirm_first(request, back="token_list", args=[request.tenant.slug]):
        return held
    form = TokenForm(request.POST, tenant=request.tenant)
    if not form.is_valid():
        return _page(request, form, status=422)
    days = form.cleaned_data["expires_in_days"]
    try:
        token, plaintext = token_create(
            tenant=request.tenant,
            name=form.cleaned_data["name"],
            scopes=form.cleaned_data["scopes"],
            mailbox_ids=[m.pk for m in form.cleaned_data["mailboxes"]],
            expires_at=timezone.now() + timedelta(days=int(days)) if days else None,
            actor=request.user,
            form_id=form.cleaned_data["form_id"],
        )
    except AlreadySubmitted as done:
        return _already_created(request, done.receipt)
    except TokenError as exc:
        form.add_error(exc.field if exc.field in form.fields else None, exc.message)
        return _page(request, form, status=422)
    # The only response that ever carries the plaintext: not cached, not redirected to.
    return render(
        request,
        "console/tokens_created.html",
        {"token": token, "plaintext": plaintext, "mailboxes": list(token.mailboxes.all())},
    )


def _already_created(request: TenantRequest, receipt) -> HttpResponse:
    """A second post of the form that created a token (a second click while the first answer was
    on its way): the browser shows this answer, not the first one, so it says which token the
    first click made and how to get a secret the admin can copy; never the secret itself."""
    return render(
        request,
        "console/tokens_already.html",
        {
            "token": selectors.token(request.tenant, int(receipt.object_id or 0))
            if receipt.action == "token.created"
            else None,
            "receipt": receipt,
        },
        status=409,
    )


@tenant_view(roles=ADMIN_ONLY)
@require_http_methods(["GET", "HEAD", "POST"])
def token_revoke_view(request: TenantRequest, token_id: int) -> HttpResponse:
    """GET asks first (a page that works without JavaScript); the POST it carries revokes."""
    if request.method in ("GET", "HEAD"):
        token = selectors.token(request.tenant, token_id)
        if token is None:
            raise Http404("No such token")
        if token.revoked_at is not None:
            # Another admin revoked it since this admin's list was opened: said, not a 404.
            messages.info(request, _("This token is already revoked."))
            return redirect("token_list", slug=request.tenant.slug)
        return render(
            request,
            "console/confirm.html",
            {
                "heading": _("Revoke the agent token “%(name)s”?") % {"name": token.name},
                "consequence": _(
                    "The agent using it is refused from its next request. Drafts it already "
                    "posted stay in the queue. This cannot be undone: the agent needs a new token."
                ),
                "action": _("Revoke the token"),
                "cancel_url": reverse("token_list", args=[request.tenant.slug]),
            },
        )
    if selectors.token(request.tenant, token_id) is None:
        raise Http404("No such token")
    try:
        token = token_revoke(tenant=request.tenant, token_id=token_id, actor=request.user)
    except TokenError as exc:
        messages.error(request, exc.message)
    else:
        messages.success(
            request,
            _("Token “%(name)s” revoked; it stopped working at once.") % {"name": token.name},
        )
    return redirect("token_list", slug=request.tenant.slug)
