from django.contrib import admin
from django.urls import include, path

urlpatterns = [
    path("", include("tenants.urls")),
    path("ops/admin/", admin.site.urls),
]
