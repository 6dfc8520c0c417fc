from django.urls import include, path

from bench.anymail_store import StoringResendTrackingView
from bench.views_floor import MACHINE_TABLE, store_only
from config.urls import urlpatterns as product_urlpatterns

urlpatterns = [
    path("anymail/", include("anymail.urls")),
    path("bench/anymail-store/resend/tracking/", StoringResendTrackingView.as_view()),
    path("bench/store-only/", store_only),
    path("webhooks/bench-store-only/", store_only, {"table": MACHINE_TABLE}),
    *product_urlpatterns,
]
