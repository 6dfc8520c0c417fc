from django.contrib import admin
from django.urls import include, path

urlpatterns = [
    path("", include("tenants.urls")),
    path("t/<slug:slug>/", include("console.urls")),
    path("", include("config.ops_urls")),
    path("api/v1/", include("agent_api.urls")),
    path("webhooks/", include("webhooks.urls")),
    path("t/<slug:slug>/", include("review.urls")),
    path("ops/admin/", admin.site.urls),
]
