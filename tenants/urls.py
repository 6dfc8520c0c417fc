from django.urls import include, path

from intents.views import queue as review_queue
from tenants import views

urlpatterns = [
    path("", views.home, name="home"),
    path("signin/", views.SignInView.as_view(), name="login"),
    path("signout/", views.SignOutView.as_view(), name="logout"),
    path("t/<slug:slug>/", review_queue, name="tenant_home"),
    path("invitations/", include("tenants.urls_invitations")),
]
