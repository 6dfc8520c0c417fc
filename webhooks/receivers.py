"""What webhooks does when the apps below it announce something (connected in ``apps.py``)."""

from __future__ import annotations

from webhooks import registration
from webhooks.services import apply, reapply


def apply_deferred_events(sender, *, messages: list[tuple[int, str]], **kwargs) -> None:
    """intents recorded these (tenant id, message id) pairs: apply the events that beat it."""
    apply.events_apply_deferred_many(messages)


def register_webhook(sender, *, tenant, actor=None, **kwargs) -> None:
    """A mailbox of this tenant was provisioned: make sure the tenant's pod webhook points at us."""
    registration.webhook_register(tenant=tenant, actor=actor)


def apply_rejected_events(sender, *, mailbox, actor=None, **kwargs) -> None:
    """A mailbox recorded its inbox: apply the events of that inbox that arrived before it did."""
    reapply.events_apply_rejected(mailbox=mailbox, actor=actor)


def forget_pod(sender, *, tenant_id: int, actor=None, **kwargs) -> None:
    """The tenant's pod is gone at AgentMail: its webhook is to be made again in the new one."""
    registration.webhook_endpoints_forget_pod(tenant_id=tenant_id, actor=actor)
