from django.apps import AppConfig


class CommonConfig(AppConfig):
    name = "common"
    verbose_name = "Shared building blocks"

    def ready(self) -> None:
        from common import checks  # noqa: F401  (registers the system checks)
