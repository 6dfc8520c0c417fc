from django.apps import AppConfig
from django.conf import settings
from django.utils.module_loading import import_string

from config.env import SettingsError
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
        blob_store_checked(settings.ATTACHMENT_BLOB_STORE)


def blob_store_checked(path: str) -> type:
    """The blob store class ``path`` names, resolved as every process starts: it was imported at
    the first attachment, so a misspelt ATTACHMENT_BLOB_STORE started (gunicorn runs no system
    checks) and made every draft with a file, and every send of one, a 500."""
    try:
        store = import_string(path)
    except ImportError:
        store = None
    if not (
        isinstance(store, type)
        and callable(getattr(store, "put", None))
        and callable(getattr(store, "read", None))
    ):
        raise SettingsError(
            "ATTACHMENT_BLOB_STORE must be the dotted path of a class with put and read, like "
            f"intents.blobs.DatabaseBlobStore, got {path!r}"
        )
    return store
