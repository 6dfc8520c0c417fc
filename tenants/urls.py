from django.urls import include, path

from tenants import views, views_passkeys, views_signin, views_sso

urlpatterns = [
    path("", views.home, name="home"),
    path("signin/", views.SignInView.as_view(), name="login"),
    path("signin/two-factor/", views_signin.two_factor_verify, name="two_factor_verify"),
    path("signin/passkey/options/", views_passkeys.signin_options, name="passkey_signin_options"),
    path("signin/passkey/", views_passkeys.signin, name="passkey_signin"),
    path("signout/", views.SignOutView.as_view(), name="logout"),
    path("preferences/", views.preferences, name="preferences"),
    path("invitations/", include("tenants.urls_invitations")),
    path("account/", include("tenants.urls_account")),
    path("sso/", views_sso.sso_choose, name="sso_choose"),
    path("sso/callback/", views_sso.sso_callback, name="sso_callback"),
    path("sso/start/<slug:slug>/", views_sso.sso_start, name="sso_start"),
]
