from django.contrib import admin
from django.urls import include, path

urlpatterns = [
    path("", include("tenants.urls")),
    path("", include("config.ops_urls")),
    path("api/v1/", include("intents.api_urls")),
    path("webhooks/", include("webhooks.urls")),
    path("t/<slug:slug>/", include("review.urls")),
    path("t/<slug:slug>/mailboxes/", include("mailboxes.urls")),
    path("ops/admin/", admin.site.urls),
]
