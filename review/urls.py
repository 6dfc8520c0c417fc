"""Review and outbox pages under /t/<slug>/; the queue itself is the tenant's home page
(``tenant_home``), routed here because tenants, the ground floor, knows no review page."""

from django.urls import path

from review.views import assignment, attachments, bodies, broadcasts, drafts, outbox, queue

urlpatterns = [
    path("", queue.queue, name="tenant_home"),
    path("queue/changes/", queue.queue_changes, name="queue_changes"),
    path("queue/approve/", queue.bulk_approve, name="bulk_approve"),
    path("nav/counts/", queue.nav_counts, name="nav_counts"),
    path("drafts/<int:draft_id>/", drafts.draft_detail, name="draft"),
    path("drafts/<int:draft_id>/approve/", drafts.draft_approve, name="draft_approve"),
    path("drafts/<int:draft_id>/reject/", drafts.draft_reject, name="draft_reject"),
    path("drafts/<int:draft_id>/edit/", drafts.draft_edit, name="draft_edit"),
    path("drafts/<int:draft_id>/notes/", drafts.draft_note_add, name="draft_note_add"),
    path(
        "drafts/<int:draft_id>/files/<int:attachment_id>/",
        attachments.attachment_download,
        name="attachment_download",
    ),
    path(
        "drafts/<int:draft_id>/files/<int:attachment_id>/preview/",
        attachments.attachment_preview,
        name="attachment_preview",
    ),
    path(
        "drafts/<int:draft_id>/versions/<int:number>/html/",
        bodies.draft_version_html,
        name="draft_version_html",
    ),
    path(
        "drafts/<int:draft_id>/html/preview/",
        bodies.draft_html_preview,
        name="draft_html_preview",
    ),
    path("drafts/<int:draft_id>/presence/", drafts.draft_presence, name="draft_presence"),
    path("drafts/<int:draft_id>/take/", assignment.draft_take, name="draft_take"),
    path("drafts/<int:draft_id>/release/", assignment.draft_release, name="draft_release"),
    path("drafts/<int:draft_id>/hand/", assignment.draft_hand, name="draft_hand"),
    path("away/", assignment.my_away, name="my_away"),
    path("outbox/", outbox.outbox, name="outbox"),
    path("outbox/<int:intent_id>/", outbox.outbox_intent, name="outbox_intent"),
    path("outbox/<int:intent_id>/cancel/", outbox.intent_cancel, name="intent_cancel"),
    path("outbox/<int:intent_id>/undo/", outbox.intent_undo, name="intent_undo"),
    path("outbox/<int:intent_id>/resolve/", outbox.intent_resolve, name="intent_resolve"),
    path("outbox/<int:intent_id>/release/", outbox.intent_release, name="intent_release"),
    path("outbox/<int:intent_id>/reopen/", outbox.intent_reopen, name="intent_reopen"),
    path("attention/", outbox.attention, name="attention"),
    path("broadcasts/", broadcasts.broadcast_list, name="broadcasts"),
    path("broadcasts/new/", broadcasts.broadcast_new, name="broadcast_new"),
    path("broadcasts/<int:broadcast_id>/", broadcasts.broadcast_detail, name="broadcast"),
    path(
        "broadcasts/<int:broadcast_id>/recipients.csv",
        broadcasts.broadcast_recipients_csv,
        name="broadcast_recipients_csv",
    ),
    path(
        "broadcasts/<int:broadcast_id>/sample/html/",
        broadcasts.broadcast_sample_html,
        name="broadcast_sample_html",
    ),
    path(
        "broadcasts/<int:broadcast_id>/approve/",
        broadcasts.broadcast_approve,
        name="broadcast_approve",
    ),
    path(
        "broadcasts/<int:broadcast_id>/reject/",
        broadcasts.broadcast_reject,
        name="broadcast_reject",
    ),
    path(
        "broadcasts/<int:broadcast_id>/<str:action>/",
        broadcasts.broadcast_control,
        name="broadcast_control",
    ),
]
