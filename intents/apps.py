from django.apps import AppConfig


class IntentsConfig(AppConfig):
    name = "intents"
    verbose_name = "Drafts and send intents"
