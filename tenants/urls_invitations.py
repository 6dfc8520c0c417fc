"""The invitee's pages (outside any tenant), mounted at /invitations/ by tenants/urls.py."""

from django.urls import path

from tenants import views_invitations as views

urlpatterns = [
    path("<int:invitation_id>/", views.invitation, name="invitation"),
    path("<int:invitation_id>/accept/", views.invitation_accept, name="invitation_accept"),
    path("<int:invitation_id>/decline/", views.invitation_decline, name="invitation_decline"),
    # Tried after the numeric routes; a token is 43 characters of url-safe base64.
    path("<str:token>/", views.invitation_open, name="invitation_open"),
]
