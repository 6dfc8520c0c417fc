"""What taking a member's right to decide would stop, said on their page and on the
deactivation's confirm page before an admin does it.

A send waits for the worker, which checks the approver's right again right before the call and
blocks the send once it is gone (DESIGN.md, contract 1): a lower role, fewer mailboxes or a
deactivation silently ended replies the person had approved (the flash afterwards counts only the
sends already past their last check). And a mailbox only they may decide for keeps its drafts
waiting for nobody once they lose the right. Two queries, whatever the number of mailboxes.
"""

from __future__ import annotations

from django.db.models import Count, Exists, OuterRef, Q
from django.utils.translation import gettext as _
from django.utils.translation import ngettext

from intents.models import Draft, SendIntent
from mailboxes.models import Mailbox
from tenants.models import Membership, Tenant

# The sends of an approver that the worker has yet to check (queued, or being sent or settled):
# intents.sending.stops holds the same ones when a right goes.
NOT_GONE_OUT = [SendIntent.State.QUEUED, SendIntent.State.SENDING, SendIntent.State.UNCERTAIN]


def _sole_mailboxes(tenant: Tenant, membership: Membership) -> list[tuple[str, int]]:
    """(address, pending drafts) of the tenant's mailboxes this member may decide for and no
    other member may."""
    others = (
        Membership.objects.filter(
            tenant=tenant,
            is_active=True,
            user__is_active=True,
            role__in=list(Membership.DECIDING_ROLES),
        )
        .exclude(pk=membership.pk)
        .filter(Q(approve_all_mailboxes=True) | Q(approve_mailboxes=OuterRef("pk")))
    )
    mailboxes = Mailbox.objects.filter(tenant=tenant)
    if not membership.approve_all_mailboxes:
        mailboxes = mailboxes.filter(approver_memberships=membership)
    rows = (
        mailboxes.filter(~Exists(others))
        .annotate(waiting=Count("drafts", filter=Q(drafts__status=Draft.Status.PENDING)))
        .order_by("address")
        .values_list("address", "waiting")
    )
    return list(rows)


def deciding_impact(tenant: Tenant, membership: Membership) -> list[str]:
    """The sentences to show before this member loses the right to decide; none when they have
    none to lose or it stops nothing."""
    if not (
        membership.is_active
        and membership.user.is_active
        and membership.role in Membership.DECIDING_ROLES
    ):
        return []
    said = []
    waiting = SendIntent.objects.filter(
        tenant=tenant, approver_id=membership.user_id, state__in=NOT_GONE_OUT
    ).count()
    if waiting:
        said.append(
            ngettext(
                "%(n)d send they approved has not gone out yet: if they lose the right to "
                "approve it (a lower role, fewer mailboxes, deactivation), it is blocked before "
                "sending. It can be reopened from the outbox and approved again.",
                "%(n)d sends they approved have not gone out yet: if they lose the right to "
                "approve them (a lower role, fewer mailboxes, deactivation), they are blocked "
                "before sending. They can be reopened from the outbox and approved again.",
                waiting,
            )
            % {"n": waiting}
        )
    for address, pending in _sole_mailboxes(tenant, membership):
        said.append(
            _(
                "Only they may approve drafts of %(mailbox)s (%(n)d waiting): give someone else "
                "the right first, or its drafts wait for nobody."
            )
            % {"mailbox": address, "n": pending}
        )
    return said
