from django.urls import path

from tenants import views

urlpatterns = [
    path("", views.home, name="home"),
    path("signin/", views.SignInView.as_view(), name="login"),
    path("signout/", views.SignOutView.as_view(), name="logout"),
    path("t/<slug:slug>/", views.tenant_home, name="tenant_home"),
]
