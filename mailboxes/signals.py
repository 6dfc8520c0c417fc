"""Signals mailboxes sends to the apps above it (which connect in their AppConfig.ready), so
that mailboxes imports none of them."""

from __future__ import annotations

from django.dispatch import Signal

# Sent when a mailbox is provisioned (inbox and key in place; also on a repeat), with ``tenant``,
# ``mailbox`` and ``actor``. webhooks registers the tenant's pod webhook; a receiver's
# ProvisioningError propagates to the caller, as a failed step of provisioning.
mailbox_provisioned = Signal()
