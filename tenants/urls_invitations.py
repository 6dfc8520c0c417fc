"""The invitee's pages (outside any tenant), mounted at /invitations/ by tenants/urls.py."""

from django.urls import path

from tenants import views_invitations as views

urlpatterns = [
    path("<int:invitation_id>/accept/", views.invitation_accept, name="invitation_accept"),
    path("<int:invitation_id>/decline/", views.invitation_decline, name="invitation_decline"),
    path("<str:token>/", views.invitation, name="invitation"),
]
