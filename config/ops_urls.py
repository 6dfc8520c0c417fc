"""Operator endpoints: health, readiness, metrics."""

urlpatterns: list = []
