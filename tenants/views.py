from __future__ import annotations

from django.contrib.auth import views as auth_views
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_GET

from tenants.access import active_memberships, tenant_view
from tenants.forms import SignInForm
from tenants.invitations import invitations_opened
from tenants.views_invitations import opened_ids


class SignInView(auth_views.LoginView):
    template_name = "tenants/login.html"
    authentication_form = SignInForm
    redirect_authenticated_user = True


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
