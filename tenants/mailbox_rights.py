"""The tenant's mailboxes named by ids in a membership's rights, an invitation or a token's
restriction.

tenants is the ground floor and imports no domain app: it reaches the Mailbox model through the
many-to-many field its own ``Membership`` model declares, only to check that the ids name this
tenant's mailboxes (another tenant's id is treated exactly like a missing one).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, cast

from tenants.models import Membership, Tenant

if TYPE_CHECKING:
    # For the annotation only: at runtime the model is reached through the field, as above.
    from mailboxes.models import Mailbox


def tenant_mailboxes(tenant: Tenant, mailbox_ids: Iterable[int]) -> list[Mailbox]:
    mailbox_model = cast(
        "type[Mailbox]", Membership._meta.get_field("approve_mailboxes").related_model
    )
    return list(mailbox_model._default_manager.filter(tenant=tenant, pk__in=list(mailbox_ids)))
