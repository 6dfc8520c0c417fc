from django.urls import path, re_path

from webhooks import views

urlpatterns = [
    path(
        "agentmail/<uuid:endpoint_id>/",
        views.agentmail_webhook,
        name="webhooks_agentmail",
    ),
    # Anything else under /webhooks/ answers as an unknown endpoint does, not with the staff UI's
    # HTML page, which the short chain (config.machine) would serve with no CSP and a CSRF cookie.
    re_path(r"^.*$", views.no_such_endpoint),
]
