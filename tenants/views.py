from __future__ import annotations

from django.contrib.auth import views as auth_views
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_GET

from tenants.access import active_memberships, tenant_view
from tenants.forms import SignInForm
from tenants.invitations import invitations_opened
from tenants.signin_audit import signin_audit
from tenants.views_invitations import opened_ids


class SignInView(auth_views.LoginView):
    template_name = "tenants/login.html"
    authentication_form = SignInForm
    redirect_authenticated_user = True

    def form_valid(self, form):
        response = super().form_valid(form)
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


@require_GET
def home(request: HttpRequest) -> HttpResponse:
    if not request.user.is_authenticated:
        return redirect("login")
    memberships = active_memberships(request.user)
    pending = invitations_opened(user=request.user, invitation_ids=opened_ids(request))
    if len(memberships) == 1 and not pending:
        return redirect("tenant_home", slug=memberships[0].tenant.slug)
    return render(
        request, "tenants/home.html", {"memberships": memberships, "invitations": pending}
    )


@tenant_view()
@require_GET
def tenant_home(request: HttpRequest) -> HttpResponse:
    return render(request, "tenants/tenant_home.html", {})
