from django.apps import AppConfig


class ReviewConfig(AppConfig):
    """The staff review pages: queue, draft, edit, outbox, needs attention (no models)."""

    name = "review"
