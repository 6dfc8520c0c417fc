from django.apps import AppConfig

from mailboxes.signals import mailbox_inbox_lost
from tenants.send_stops import sends_stopping


class IntentsConfig(AppConfig):
    name = "intents"
    verbose_name = "Drafts and send intents"

    def ready(self) -> None:
        # A change that stops sends (tenants, mailboxes) waits for the pre-call checks it
        # affects through this receiver: those apps do not import intents. Imported here: the
        # receiver needs the models, which are not loaded yet at import time.
        from intents.sending import inbox_lost, stops

        sends_stopping.connect(stops.on_sends_stopping, dispatch_uid="intents.sending.stops")
        mailbox_inbox_lost.connect(
            inbox_lost.on_mailbox_inbox_lost, dispatch_uid="intents.sending.inbox_lost"
        )
        # Resolved as every process starts, not at the first attachment (intents.blobs).
        from intents.blobs import blob_store_class

        blob_store_class()
