"""Signals mailboxes sends to the apps above it (which connect in their AppConfig.ready), so
that mailboxes imports none of them."""

from __future__ import annotations

from django.dispatch import Signal

# Sent when a mailbox is provisioned (inbox and key in place; also on a repeat), with ``tenant``,
# ``mailbox`` and ``actor``. webhooks registers the tenant's pod webhook; a receiver's
# ProvisioningError propagates to the caller, as a failed step of provisioning.
mailbox_provisioned = Signal()

# Sent inside the transaction that forgets a mailbox's inbox AgentMail no longer has
# (``mailboxes.recovery``), before the mailbox's row is locked (intents lock their sends first,
# as the worker does), with ``tenant_id`` and ``mailbox_id``. intents hands the mailbox's
# uncertain sends to a person and answers ``{"sending": n}``, the sends with a call on its way,
# which make the forget refuse (nothing changes).
mailbox_inbox_lost = Signal()

# Sent inside the transaction that forgets a tenant's pod AgentMail no longer has, with
# ``tenant_id`` and ``actor``: webhooks draws a new client_id for the tenant's webhook endpoint,
# whose pod webhook went with the pod, so that the next registration makes it in the new pod.
tenant_pod_lost = Signal()
