"""factory_boy factories that build a full tenant graph."""

from __future__ import annotations

import factory

from mailboxes.models import Mailbox
from tenants.models import Membership, Tenant, User

PASSWORD = "correct-horse-battery-staple"


class TenantFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = Tenant
        django_get_or_create = ("slug",)

    name = factory.Sequence(lambda n: f"Tenant {n}")
    slug = factory.Sequence(lambda n: f"tenant-{n}")
    # Most tests approve and send at once; the undo tests set a window (tests/review/test_undo.py).
    send_hold_seconds = 0


class UserFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = User
        skip_postgeneration_save = True

    email = factory.Sequence(lambda n: f"person{n}@example.test")
    full_name = factory.Faker("name")
    password = factory.PostGenerationMethodCall("set_password", PASSWORD)

    @factory.post_generation
    def _save(self, create, extracted, **kwargs):
        if create:
            self.save()


class MembershipFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = Membership

    user = factory.SubFactory(UserFactory)
    tenant = factory.SubFactory(TenantFactory)
    role = Membership.Role.APPROVER


def make_local_mailbox(tenant, username="support", **kwargs) -> Mailbox:
    """An active mailbox row with a sealed dummy key, for tests that make no provider call."""
    mailbox = Mailbox.objects.create(
        tenant=tenant,
        username=username,
        address=f"{username}.{tenant.slug}@agentmail.test",
        inbox_id=f"{username}.{tenant.slug}@agentmail.test",
        status=Mailbox.Status.PROVISIONING,
        **kwargs,
    )
    mailbox.api_key_sealed = mailbox.seal_api_key("am_local_only_not_a_real_key")
    mailbox.status = Mailbox.Status.ACTIVE
    mailbox.save(update_fields=["api_key_sealed", "status"])
    return mailbox


def approve_new_draft(tenant, mailbox, approver, *, actor_user=None, **fields):
    """A draft with ``fields`` (to, subject, text...), written by ``actor_user`` (the approver
    unless given), approved by ``approver`` at its first version through the services: the
    SendIntent."""
    from intents import services

    fields = {
        "to": ["customer@example.com"],
        "subject": "Your refund",
        "text": "We refunded your order.",
        **fields,
    }
    draft = services.draft_create(
        tenant=tenant, mailbox=mailbox, actor_user=actor_user or approver, **fields
    )
    return services.draft_approve(
        tenant=tenant,
        draft_id=draft.pk,
        version=1,
        content_hash=draft.versions.get().content_hash,
        actor=approver,
    )
