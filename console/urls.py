"""Tenant administration under /t/<slug>/ (mounted by config/urls.py): the admin pages at
admin/, agent tokens at admin/tokens/, agent events at admin/agent-events/, mailboxes at
mailboxes/."""

from django.urls import include, path

from console import (
    views,
    views_analytics,
    views_deadlines,
    views_events,
    views_mailboxes,
    views_signin,
    views_tokens,
)

admin_patterns = [
    path("", views.admin_home, name="admin_home"),
    path("members/", views.members, name="admin_members"),
    path("members/<int:membership_id>/", views.member_detail, name="admin_member"),
    path("members/<int:membership_id>/role/", views.member_role, name="admin_member_role"),
    path("members/<int:membership_id>/rights/", views.member_rights, name="admin_member_rights"),
    path("members/<int:membership_id>/away/", views.member_away, name="admin_member_away"),
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
        "members/<int:membership_id>/reset-two-factor/",
        views_signin.member_two_factor_reset,
        name="admin_member_two_factor_reset",
    ),
    path(
        "invitations/<int:invitation_id>/revoke/",
        views.invitation_revoke,
        name="admin_invitation_revoke",
    ),
    path("policies/", views.policies, name="admin_policies"),
    path("policies/domains/", views.own_domains, name="admin_own_domains"),
    path("policies/deadlines/", views_deadlines.deadlines, name="admin_deadlines"),
    path("recipients/", views.recipients, name="admin_recipients"),
    path("suppressions/", views.suppressions, name="admin_suppressions"),
    path("suppressions/add/", views.suppression_add, name="admin_suppression_add"),
    path(
        "suppressions/<int:suppression_id>/remove/",
        views.suppression_remove,
        name="admin_suppression_remove",
    ),
    path("webhooks/", views.webhooks, name="admin_webhooks"),
    path("sign-in/", views_signin.signin_settings, name="admin_signin"),
    path("sign-in/two-factor/", views_signin.two_factor_policy, name="admin_two_factor_policy"),
    path("sign-in/sso/", views_signin.sso_settings, name="admin_sso_settings"),
    path("audit/", views.audit, name="admin_audit"),
    path("audit.csv", views.audit_csv, name="admin_audit_csv"),
    path("analytics/", views_analytics.analytics, name="admin_analytics"),
    path("analytics.csv", views_analytics.analytics_csv, name="admin_analytics_csv"),
]

token_patterns = [
    path("", views_tokens.token_list, name="token_list"),
    path("new/", views_tokens.token_new, name="token_new"),
    path("<int:token_id>/revoke/", views_tokens.token_revoke_view, name="token_revoke"),
]

agent_event_patterns = [
    path("", views_events.agent_events, name="agent_events"),
    path("new/", views_events.endpoint_new, name="agent_events_new"),
    path("<int:endpoint_id>/rotate/", views_events.endpoint_rotate, name="agent_events_rotate"),
    path("<int:endpoint_id>/delete/", views_events.endpoint_delete, name="agent_events_delete"),
    path(
        "<int:endpoint_id>/enable/",
        views_events.endpoint_switch,
        {"to": "on"},
        name="agent_events_enable",
    ),
    path(
        "<int:endpoint_id>/disable/",
        views_events.endpoint_switch,
        {"to": "off"},
        name="agent_events_disable",
    ),
    path(
        "deliveries/<int:delivery_id>/resend/",
        views_events.delivery_resend,
        name="agent_events_resend",
    ),
]

mailbox_patterns = [
    path("", views_mailboxes.mailbox_list, name="mailbox_list"),
    path("new/", views_mailboxes.mailbox_create, name="mailbox_create"),
    path("<int:mailbox_id>/", views_mailboxes.mailbox_detail, name="mailbox_detail"),
    path("<int:mailbox_id>/policy/", views_mailboxes.mailbox_policy, name="mailbox_policy"),
    path(
        "<int:mailbox_id>/assignment/",
        views_mailboxes.mailbox_assignment,
        name="mailbox_assignment",
    ),
    path("<int:mailbox_id>/status/", views_mailboxes.mailbox_status, name="mailbox_status"),
    path("<int:mailbox_id>/provision/", views_mailboxes.mailbox_retry, name="mailbox_retry"),
    path(
        "<int:mailbox_id>/key-check/", views_mailboxes.mailbox_key_check, name="mailbox_key_check"
    ),
    path(
        "<int:mailbox_id>/key-replace/",
        views_mailboxes.mailbox_key_replace,
        name="mailbox_key_replace",
    ),
    path(
        "<int:mailbox_id>/inbox-recover/",
        views_mailboxes.mailbox_inbox_recover,
        name="mailbox_inbox_recover",
    ),
]

urlpatterns = [
    path("admin/tokens/", include(token_patterns)),
    path("admin/agent-events/", include(agent_event_patterns)),
    path("admin/", include(admin_patterns)),
    path("mailboxes/", include(mailbox_patterns)),
]
