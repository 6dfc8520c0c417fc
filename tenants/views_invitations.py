"""The invitee's pages, outside any tenant: the link, and accepting or declining after sign-in.

Opening a link with a valid secret records the invitation's id in the session. Accepting and
declining need that record as well as being signed in as the invited address (see
tenants.invitations for why the address alone is not enough). Django's login keeps the session's
data when an anonymous session signs in, so the record survives the sign-in.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import cast

from django import forms
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.contrib.auth.forms import SetPasswordForm
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.utils.translation import gettext as _
from django.utils.translation import gettext_lazy
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_http_methods, require_POST, require_safe

from tenants import invitations
from tenants.access import AuthenticatedRequest
from tenants.models import Invitation, User
from tenants.services import AdminError
from tenants.user_sessions import (
    METHOD_KEY,
    sso_session_beyond_its_tenants,
    sso_tenants_trusted,
)

SESSION_KEY = "tenants.invitations_opened"
# The address the sign-in page fills in after the invitation page sent the invitee there.
SIGNIN_EMAIL_KEY = "tenants.signin_email"
TEMPLATE = "tenants/invitation.html"


def link_required() -> AdminError:
    # A function, not a constant: the message is in the language of the request that gets it.
    return AdminError(
        "link_required", _("Open the invitation link you were given, then accept it there.")
    )


class NewAccountForm(SetPasswordForm):
    full_name = forms.CharField(
        label=gettext_lazy("Your name (optional)"), max_length=150, required=False
    )
    field_order = ["full_name", "new_password1", "new_password2"]

    def clean_full_name(self) -> str:
        try:
            return invitations.full_name_checked(self.cleaned_data["full_name"])
        except AdminError as error:
            raise forms.ValidationError(error.message, code=error.code) from None


def opened_ids(request: HttpRequest) -> list[int]:
    return [int(pk) for pk in request.session.get(SESSION_KEY, [])]


def _remember(request: HttpRequest, invitation: Invitation) -> None:
    ids = opened_ids(request)
    if invitation.pk not in ids:
        request.session[SESSION_KEY] = [*ids, invitation.pk][-20:]


def _forget(request: HttpRequest, invitation_id: int) -> None:
    request.session[SESSION_KEY] = [pk for pk in opened_ids(request) if pk != invitation_id]


def _closed(request: HttpRequest, invitation: Invitation | None) -> HttpResponse:
    if invitation is None:
        error = AdminError("not_found", _("This invitation link does not work."))
        status = 404
    else:
        error = invitations.refusal(invitation)
        status = 410
    return render(request, TEMPLATE, {"refused": error.message}, status=status)


def _new_account_form(invitation: Invitation, data=None) -> NewAccountForm:
    # An unsaved user, so that the password validators can compare against the address and name.
    person = User(email=invitation.email, full_name=invitation.full_name)
    return NewAccountForm(person, data, initial={"full_name": invitation.full_name})


@never_cache
@require_safe
def invitation_open(request: HttpRequest, token: str) -> HttpResponse:
    """The link the admin handed over. Its secret is exchanged at once for a record in the session
    and a redirect, as Django's password reset does: the secret then appears in no later URL, no
    Referer, and no 4xx log line of a page the invitee fills in."""
    found = invitations.invitation_by_token(token)
    if found is None or found.state != Invitation.State.PENDING or found.is_expired:
        return _closed(request, found)
    _remember(request, found)
    return redirect("invitation", invitation_id=found.pk)


@never_cache
@require_http_methods(["GET", "HEAD", "POST"])
def invitation(request: HttpRequest, invitation_id: int) -> HttpResponse:
    if invitation_id not in opened_ids(request):
        return render(request, TEMPLATE, {"refused": link_required().message}, status=403)
    found = (
        invitations.with_expiry(Invitation.objects.select_related("tenant", "invited_by"))
        .filter(pk=invitation_id)
        .first()
    )
    if found is None or found.state != Invitation.State.PENDING or found.is_expired:
        return _closed(request, found)
    context: dict[str, object] = {"invitation": found}
    if request.user.is_authenticated:
        if request.user.email != found.email:
            context["wrong_account"] = True
            return render(request, TEMPLATE, context, status=403)
        if held_back := _sso_refusal(request, found.pk):
            context["password_needed"] = held_back.message
        return render(request, TEMPLATE, context)
    # One page whether or not the address has an account, and one answer to the form: the link
    # may have been forwarded, and the admin who made it holds it too, so telling the two apart
    # told any admin which addresses have an account here, in any tenant (their own invite page
    # answers the same whatever the address). An existing account's password is never set here;
    # its owner signs in, then accepts.
    form = _new_account_form(found, request.POST if request.method == "POST" else None)
    if request.method == "POST" and form.is_valid():
        try:
            invitations.invitation_accept_with_new_account(
                invitation_id=found.pk,
                password=form.cleaned_data["new_password1"],
                full_name=form.cleaned_data["full_name"],
            )
        except AdminError as error:
            if error.code != "account_exists":
                form.add_error(None, error.message)
        else:
            _forget(request, found.pk)
        if not form.errors:
            messages.info(
                request,
                _(
                    "Now sign in as %(email)s. If that address already had an account, use its "
                    "own password: an invitation link never changes an existing account."
                )
                % {"email": found.email},
            )
            request.session[SIGNIN_EMAIL_KEY] = found.email
            return redirect("login")
    context["form"] = form
    return render(request, TEMPLATE, context, status=400 if request.method == "POST" else 200)


def _sso_session_of_another_tenant(request: HttpRequest, invitation_id: int) -> bool:
    """A session from single sign-on, and the invitation is to a tenant it did not come
    through."""
    if request.session.get(METHOD_KEY) != "sso":
        return False
    tenant_id = (
        Invitation.objects.filter(pk=invitation_id).values_list("tenant_id", flat=True).first()
    )
    return tenant_id not in sso_tenants_trusted(request)


def _sso_refusal(request: HttpRequest, invitation_id: int) -> AdminError | None:
    """Why this session may not accept or decline the invitation, if it may not.

    Joining a tenant is the person's own act; a session from single sign-on is one tenant's
    provider's word, and that tenant's admin runs the provider: a browser sent through it (a
    plain link can do that) was signed in as an account the admin holds, and accepting another
    tenant's invitation there handed that tenant's role to the admin. An account the provider
    made has no password or passkey of its own to sign in with instead, and is told so."""
    if not (
        sso_session_beyond_its_tenants(request)
        or _sso_session_of_another_tenant(request, invitation_id)
    ):
        return None
    user = cast(User, request.user)
    if user.has_usable_password() or user.passkeys.exists():
        return AdminError(
            "password_needed",
            _("Sign in with your password to accept or decline an invitation."),
        )
    return AdminError(
        "password_needed",
        _(
            "Your account signs in only through single sign-on, which speaks only for the "
            "tenants that use it: it cannot accept or decline another tenant's invitation. Ask "
            "whoever invited you to invite another address of yours, or ask your operator to "
            "give this account a password; sign in with it, then open the invitation link again."
        ),
    )


def _decide[T](
    request: AuthenticatedRequest, invitation_id: int, service: Callable[..., T]
) -> T | AdminError:
    """What ``service`` returned for this invitation and user, or why it was refused."""
    if invitation_id not in opened_ids(request):
        return link_required()
    if held_back := _sso_refusal(request, invitation_id):
        return held_back
    try:
        result = service(invitation_id=invitation_id, user=request.user)
    except AdminError as error:
        return error
    _forget(request, invitation_id)
    return result


def _accepted_by_this_person(
    request: AuthenticatedRequest, invitation_id: int
) -> Invitation | None:
    """The invitation when this person accepted it already and is a member through it: a second
    tab's Accept or Decline, posted after the first tab's Accept (which forgot the link's
    record, so the answer was "Open the invitation link you were given", and the link then said
    it was used). Only the person who accepted it is told; anyone else naming the id is not."""
    if invitation_id in opened_ids(request):
        return None
    return (
        Invitation.objects.select_related("tenant")
        .filter(
            pk=invitation_id,
            state=Invitation.State.ACCEPTED,
            closed_by=request.user,
            tenant__memberships__user=request.user,
            tenant__memberships__is_active=True,
        )
        .first()
    )


def _member_already(invitation: Invitation) -> HttpResponse:
    return redirect("tenant_home", slug=invitation.tenant.slug)


@login_required
@require_POST
def invitation_accept(request: AuthenticatedRequest, invitation_id: int) -> HttpResponse:
    if accepted := _accepted_by_this_person(request, invitation_id):
        messages.info(request, _accepted_already(accepted))
        return _member_already(accepted)
    membership = _decide(request, invitation_id, invitations.invitation_accept)
    if isinstance(membership, AdminError):
        error = membership
        return render(request, TEMPLATE, {"refused": error.message}, status=_status(error))
    messages.success(
        request, _("You are now a member of %(tenant)s.") % {"tenant": membership.tenant.name}
    )
    return redirect("tenant_home", slug=membership.tenant.slug)


@login_required
@require_POST
def invitation_decline(request: AuthenticatedRequest, invitation_id: int) -> HttpResponse:
    if accepted := _accepted_by_this_person(request, invitation_id):
        messages.info(request, _accepted_already(accepted))
        return _member_already(accepted)
    declined = _decide(request, invitation_id, invitations.invitation_decline)
    if isinstance(declined, AdminError):
        error = declined
        return render(request, TEMPLATE, {"refused": error.message}, status=_status(error))
    messages.success(
        request,
        _("You declined the invitation to %(tenant)s.") % {"tenant": declined.tenant.name},
    )
    return redirect("home")


def _accepted_already(invitation: Invitation) -> str:
    return _("You accepted this invitation already: you are a member of %(tenant)s.") % {
        "tenant": invitation.tenant.name
    }


def _status(error: AdminError) -> int:
    return {
        "link_required": 403,
        "wrong_account": 403,
        "not_found": 404,
        "already_member": 409,
        "password_needed": 403,
    }.get(error.code, 410)
