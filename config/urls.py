from django.contrib import admin
from django.urls import include, path

# The machine endpoints first: the resolver tries patterns in order, and the provider's webhooks
# and the agents' calls are most of the requests (none of the later patterns overlaps them).
urlpatterns = [
    path("webhooks/", include("webhooks.urls")),
    path("api/v1/", include("agent_api.urls")),
    path("", include("tenants.urls")),
    path("t/<slug:slug>/", include("console.urls")),
    path("", include("config.ops_urls")),
    path("t/<slug:slug>/", include("review.urls")),
    path("ops/admin/", admin.site.urls),
]
