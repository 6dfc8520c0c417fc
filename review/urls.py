"""Review and outbox pages under /t/<slug>/; the queue itself is the tenant's home page
(``tenant_home``), routed here because tenants, the ground floor, knows no review page."""

from django.urls import path

from review import views

urlpatterns = [
    path("", views.queue, name="tenant_home"),
    path("queue/changes/", views.queue_changes, name="queue_changes"),
    path("queue/approve/", views.bulk_approve, name="bulk_approve"),
    path("drafts/<int:draft_id>/", views.draft_detail, name="draft"),
    path("drafts/<int:draft_id>/approve/", views.draft_approve, name="draft_approve"),
    path("drafts/<int:draft_id>/reject/", views.draft_reject, name="draft_reject"),
    path("drafts/<int:draft_id>/edit/", views.draft_edit, name="draft_edit"),
    path("outbox/", views.outbox, name="outbox"),
    path("outbox/<int:intent_id>/", views.outbox_intent, name="outbox_intent"),
    path("outbox/<int:intent_id>/cancel/", views.intent_cancel, name="intent_cancel"),
    path("outbox/<int:intent_id>/resolve/", views.intent_resolve, name="intent_resolve"),
    path("outbox/<int:intent_id>/release/", views.intent_release, name="intent_release"),
    path("outbox/<int:intent_id>/reopen/", views.intent_reopen, name="intent_reopen"),
    path("attention/", views.attention, name="attention"),
]
