from django.apps import AppConfig


class CommonConfig(AppConfig):
    name = "common"
    verbose_name = "Shared building blocks"

    def ready(self) -> None:
        from common import checks  # noqa: F401  (registers the system checks)
        from common.crypto import key_ring

        # SECRET_ENCRYPTION_KEYS is parsed as every process starts, not at the first secret a
        # request needs: gunicorn (config.wsgi, config.asgi) runs no system checks, so a web
        # process with a broken ring used to start and fail each webhook and sign-in on it.
        key_ring()
