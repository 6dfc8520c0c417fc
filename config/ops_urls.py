"""Operator endpoints: health, readiness, metrics."""

from django.urls import path

from config import ops

urlpatterns = [
    path("healthz", ops.healthz, name="healthz"),
    path("readyz", ops.readyz, name="readyz"),
    path("metrics", ops.metrics, name="metrics"),
]
