"""The invitee's one-time set-password page (outside any tenant: they are not signed in yet)."""

from django.urls import path

from tenants import views_admin

urlpatterns = [
    path("<str:uidb64>/<str:token>/", views_admin.set_password, name="set_password"),
]
