from django.urls import include, path

from tenants import views, views_signin

urlpatterns = [
    path("", views.home, name="home"),
    path("signin/", views.SignInView.as_view(), name="login"),
    path("signin/two-factor/", views_signin.two_factor_verify, name="two_factor_verify"),
    path("signout/", views.SignOutView.as_view(), name="logout"),
    path("invitations/", include("tenants.urls_invitations")),
    path("account/", include("tenants.urls_account")),
]
