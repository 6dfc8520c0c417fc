from django.apps import AppConfig


class WebhooksConfig(AppConfig):
    name = "webhooks"
    verbose_name = "Webhooks and delivery"
