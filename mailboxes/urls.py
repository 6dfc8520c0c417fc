from django.urls import path

from mailboxes import views

urlpatterns = [
    path("", views.mailbox_list, name="mailbox_list"),
    path("new/", views.mailbox_create, name="mailbox_create"),
    path("<int:mailbox_id>/", views.mailbox_detail, name="mailbox_detail"),
    path("<int:mailbox_id>/policy/", views.mailbox_policy, name="mailbox_policy"),
    path("<int:mailbox_id>/status/", views.mailbox_status, name="mailbox_status"),
    path("<int:mailbox_id>/provision/", views.mailbox_retry, name="mailbox_retry"),
]
