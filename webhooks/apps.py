from django.apps import AppConfig

from intents.signals import message_ids_recorded
from mailboxes.signals import mailbox_provisioned, tenant_pod_lost


class WebhooksConfig(AppConfig):
    name = "webhooks"
    verbose_name = "Webhooks and delivery"

    def ready(self) -> None:
        # Imported here: the receivers need the models, which are not loaded yet at import time.
        from webhooks import receivers

        message_ids_recorded.connect(receivers.apply_deferred_events)
        mailbox_provisioned.connect(receivers.register_webhook)
        mailbox_provisioned.connect(receivers.apply_rejected_events)
        tenant_pod_lost.connect(receivers.forget_pod)
