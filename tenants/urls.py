from django.urls import include, path

from tenants import views

urlpatterns = [
    path("", views.home, name="home"),
    path("signin/", views.SignInView.as_view(), name="login"),
    path("signout/", views.SignOutView.as_view(), name="logout"),
    path("t/<slug:slug>/admin/tokens/", include("tenants.urls_tokens")),
    path("t/<slug:slug>/admin/", include("tenants.urls_admin")),
    path("invitations/", include("tenants.urls_invitations")),
]
