"""Tenant admin pages, mounted at /t/<slug>/admin/ by tenants/urls.py."""

from django.urls import path

from tenants import views_admin as views

urlpatterns = [
    path("", views.admin_home, name="admin_home"),
    path("members/", views.members, name="admin_members"),
    path("members/<int:membership_id>/", views.member_detail, name="admin_member"),
    path("members/<int:membership_id>/role/", views.member_role, name="admin_member_role"),
    path("members/<int:membership_id>/rights/", views.member_rights, name="admin_member_rights"),
    path(
        "members/<int:membership_id>/deactivate/",
        views.member_deactivate,
        name="admin_member_deactivate",
    ),
    path(
        "members/<int:membership_id>/reactivate/",
        views.member_reactivate,
        name="admin_member_reactivate",
    ),
    path(
        "invitations/<int:invitation_id>/revoke/",
        views.invitation_revoke,
        name="admin_invitation_revoke",
    ),
    path("policies/", views.policies, name="admin_policies"),
    path("recipients/", views.recipients, name="admin_recipients"),
    path("suppressions/", views.suppressions, name="admin_suppressions"),
    path("suppressions/add/", views.suppression_add, name="admin_suppression_add"),
    path(
        "suppressions/<int:suppression_id>/remove/",
        views.suppression_remove,
        name="admin_suppression_remove",
    ),
    path("webhooks/", views.webhooks, name="admin_webhooks"),
    path("audit/", views.audit, name="admin_audit"),
    path("audit.csv", views.audit_csv, name="admin_audit_csv"),
]
