from django.apps import AppConfig


class TenantsConfig(AppConfig):
    name = "tenants"
    verbose_name = "Tenants and members"

    def ready(self) -> None:
        # Sign-in signal receivers: session tracking and the sign-in audit rows.
        from tenants import user_sessions  # noqa: F401
