from django.contrib import admin
from django.urls import include, path

from tenants import views as tenant_views

# The machine endpoints first: the resolver tries patterns in order, and the provider's webhooks
# and the agents' calls are most of the requests (none of the later patterns overlaps them).
urlpatterns = [
    path("webhooks/", include("webhooks.urls")),
    path("api/v1/", include("agent_api.urls")),
    path("", include("tenants.urls")),
    path("t/<slug:slug>/", include("console.urls")),
    path("", include("config.ops_urls")),
    path("t/<slug:slug>/", include("review.urls")),
    # The admin's own sign-in and password forms are not this site's: they skipped the audit log,
    # and wrong current passwords there were never throttled (tenants.views).
    path("ops/admin/login/", tenant_views.operators_admin_signin, name="operators_admin_signin"),
    path(
        "ops/admin/password_change/",
        tenant_views.operators_admin_password_change,
        name="operators_admin_password_change",
    ),
    path("ops/admin/", admin.site.urls),
]
