"""The tenant's mailboxes named by ids in a membership's rights, an invitation or a token's
restriction.

tenants is the ground floor and imports no domain app: it reaches the Mailbox model through the
many-to-many field its own ``Membership`` model declares, only to check that the ids name this
tenant's mailboxes (another tenant's id is treated exactly like a missing one).
"""

from __future__ import annotations

from collections.abc import Iterable

from tenants.models import Membership, Tenant


def tenant_mailbox_ids(tenant: Tenant, mailbox_ids: Iterable[int]) -> list[int]:
    """Those of ``mailbox_ids`` that name this tenant's mailboxes (ids are all a many-to-many
    ``set()`` needs, so tenants never handles a mailbox row)."""
    mailbox_model = Membership._meta.get_field("approve_mailboxes").related_model
    assert isinstance(mailbox_model, type)  # a concrete model, not the "self" placeholder
    found = mailbox_model._default_manager.filter(tenant=tenant, pk__in=list(mailbox_ids))
    return list(found.values_list("pk", flat=True))
