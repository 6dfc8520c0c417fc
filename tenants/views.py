from __future__ import annotations

from django.contrib import messages
from django.contrib.auth import views as auth_views
from django.contrib.auth.decorators import login_required
from django.contrib.auth.views import redirect_to_login
from django.core.exceptions import PermissionDenied
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.shortcuts import redirect, render
from django.urls import reverse
from django.utils import timezone, translation
from django.utils.translation import get_language_from_request
from django.utils.translation import gettext as _
from django.views.decorators.http import require_http_methods, require_safe

from tenants.access import AuthenticatedRequest, session_memberships, tenant_view
from tenants.forms import PreferencesForm, SignInForm
from tenants.invitations import invitations_opened
from tenants.next_url import safe_next_url
from tenants.preferences import time_zone_names, user_set_preferences
from tenants.services import AdminError
from tenants.signin_audit import signin_audit
from tenants.user_sessions import sso_session_beyond_its_tenants
from tenants.views_invitations import SIGNIN_EMAIL_KEY, opened_ids


class SignInView(auth_views.LoginView):
    template_name = "tenants/login.html"
    authentication_form = SignInForm
    redirect_authenticated_user = True

    def get_redirect_url(self, request: HttpRequest | None = None) -> str:
        # The one rule of every sign-in step (tenants.next_url): Django's own check let through
        # an address a browser reads as another site's, which this page hands to its passkey
        # script.
        request = request or self.request
        return safe_next_url(
            request,
            request.POST.get(self.redirect_field_name) or request.GET.get(self.redirect_field_name),
            fallback="",
        )

    def get_initial(self):
        # Only what the invitation page put in this session (the invitation's own address, once
        # its form was accepted): never a query parameter, which a stranger's link could set.
        initial = super().get_initial()
        email = self.request.session.get(SIGNIN_EMAIL_KEY)
        if isinstance(email, str) and email:
            initial["username"] = email
        return initial

    def get_form(self, form_class=None):
        form = super().get_form(form_class)
        if form.initial.get("username"):
            form.fields["username"].widget.attrs.pop("autofocus", None)
            form.fields["password"].widget.attrs["autofocus"] = True
        return form

    def form_valid(self, form):
        response = super().form_valid(form)
        self.request.session.pop(SIGNIN_EMAIL_KEY, None)
        # The audit row is written where a person signs in (here, the second-factor step, single
        # sign-on, passkeys), not on every login() call.
        signin_audit(
            action="signin.succeeded",
            user=form.get_user(),
            request=self.request,
            data={"method": "password"},
        )
        return response


class SignOutView(auth_views.LogoutView):
    pass


@require_http_methods(["GET", "HEAD", "POST"])
def operators_admin_signin(request: HttpRequest) -> HttpResponse:
    """The operators' admin's sign-in page (``/ops/admin/login/``): this site's sign-in, then back.

    Django's admin signs in with a form of its own, which wrote no ``signin.succeeded`` audit
    row and read the address as typed; one sign-in page keeps one set of rules. The admin sends
    here whoever may not use it: a signed-in person who is not an operator is told so (sending
    them to the sign-in page would send them straight back to the admin, without end)."""
    next_url = safe_next_url(request, request.GET.get("next"), fallback=reverse("admin:index"))
    if not request.user.is_authenticated:
        return redirect_to_login(next_url)
    if request.user.is_active and request.user.is_staff:
        return HttpResponseRedirect(next_url)
    raise PermissionDenied(_("The operators' admin is for Countersign's operators."))


@require_http_methods(["GET", "HEAD", "POST"])
def operators_admin_password_change(request: HttpRequest) -> HttpResponse:
    """The admin's "Change password" (``/ops/admin/password_change/``) is the account page's.

    Django's form checked the current password with ``check_password()``: wrong guesses were never
    counted by django-axes nor the client's budget, so a stolen operator's cookie could try
    passwords there without end; and a change there wrote no audit row. The account page
    (tenants.forms.PasswordChangeForm, tenants.passwords) does all of that."""
    return redirect("password_change")


@require_safe
def home(request: HttpRequest) -> HttpResponse:
    if not request.user.is_authenticated:
        return redirect("login")
    memberships = session_memberships(request)
    pending = invitations_opened(user=request.user, invitation_ids=opened_ids(request))
    if len(memberships) == 1 and not pending:
        return redirect("tenant_home", slug=memberships[0].tenant.slug)
    return render(
        request, "tenants/home.html", {"memberships": memberships, "invitations": pending}
    )


@tenant_view()
@require_safe
def tenant_home(request: HttpRequest) -> HttpResponse:
    return render(request, "tenants/tenant_home.html", {})


@login_required
@require_http_methods(["GET", "HEAD", "POST"])
def preferences(request: AuthenticatedRequest) -> HttpResponse:
    """The signed-in user's language and time zone."""
    user = request.user
    form = PreferencesForm(
        request.POST if request.method == "POST" else None,
        initial={"language": user.language, "time_zone": user.time_zone},
    )
    if request.method == "POST" and sso_session_beyond_its_tenants(request):
        # The preferences are the person's in every tenant; this provider speaks for its own.
        messages.error(
            request, _("Sign in with your password to change your language or time zone.")
        )
        return redirect("preferences")
    if request.method == "POST" and form.is_valid():
        try:
            user_set_preferences(
                user=user,
                language=form.cleaned_data["language"],
                time_zone=form.cleaned_data["time_zone"],
            )
        except AdminError as error:
            form.add_error(error.field, error.message)
        else:
            # The new language applies from this response on (the page after the redirect).
            translation.activate(user.language or get_language_from_request(request))
            messages.success(request, _("Your preferences are saved."))
            return redirect("preferences")
    context = {
        "form": form,
        "time_zones": sorted(time_zone_names()),
        "now": timezone.now(),
    }
    status = 400 if request.method == "POST" else 200
    return render(request, "tenants/preferences.html", context, status=status)
