from django.apps import AppConfig


class IntentsConfig(AppConfig):
    name = "intents"
    verbose_name = "Drafts and send intents"

    def ready(self) -> None:
        # A change that stops sends (tenants, mailboxes) waits for the pre-call checks it
        # affects through this receiver: those apps do not import intents.
        from intents.sending.stops import on_sends_stopping
        from tenants.send_stops import sends_stopping

        sends_stopping.connect(on_sends_stopping, dispatch_uid="intents.sending.stops")
