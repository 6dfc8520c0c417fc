from django.urls import include, path

from tenants import views

urlpatterns = [
    path("", views.home, name="home"),
    path("signin/", views.SignInView.as_view(), name="login"),
    path("signout/", views.SignOutView.as_view(), name="logout"),
    path("preferences/", views.preferences, name="preferences"),
    path("invitations/", include("tenants.urls_invitations")),
]
