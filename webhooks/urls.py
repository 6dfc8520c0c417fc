from django.urls import path

from webhooks import views

urlpatterns = [
    path(
        "agentmail/<uuid:endpoint_id>/",
        views.agentmail_webhook,
        name="webhooks_agentmail",
    ),
]
