from django.urls import include, path

from bench.views_floor import store_only
from config.urls import urlpatterns as product_urlpatterns

urlpatterns = [
    path("anymail/", include("anymail.urls")),
    path("bench/store-only/", store_only),
    *product_urlpatterns,
]
