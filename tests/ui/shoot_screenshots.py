"""Screenshots of the review and admin pages for docs/screenshots (run on demand, not in CI):

COUNTERSIGN_ENV=test TEST_DATABASE_NAME=test_ui .tools/bin/uv run pytest tests/ui/shoot_screenshots.py
"""

from datetime import timedelta
from pathlib import Path

import pytest
from django.conf import settings
from django.db.models import F
from django.utils import timezone

from console import services as admin_services
from intents import services, tasks
from intents.models import Draft, SendAttempt, SendIntent, Suppression
from intents.selectors.queue import QueueFilter
from review import queries
from tenants import invitations
from tenants.models import AgentToken, Membership
from tests.browser import sign_in
from webhooks.models import InboundMessage
from webhooks.services.apply import HOLD_REASON

OUT = Path(settings.BASE_DIR) / "docs" / "screenshots"
pytestmark = pytest.mark.browser


def build(tenant, admin, mailbox, member_of):
    tenant.name = "Acme Support"
    tenant.save(update_fields=["name"])
    bot = AgentToken.objects.create(
        tenant=tenant,
        name="refund-bot",
        prefix="k3x9q2ab",
        digest="0" * 64,
        scopes=["drafts:write"],
        all_mailboxes=True,
    )
    limited = member_of(tenant, "approver", approve_all_mailboxes=False)
    limited.user.full_name = "Arthur Approver"
    limited.user.save(update_fields=["full_name"])
    limited.approve_mailboxes.set([mailbox])
    viewer = member_of(tenant, "viewer")
    viewer.user.full_name = "Vera Viewer"
    viewer.user.save(update_fields=["full_name"])
    invitations.invitation_create(
        tenant=tenant, email="new.hire@acme.test", role="approver", actor=admin.user
    )
    admin_services.suppression_add(
        tenant=tenant,
        address="legal@competitor.test",
        note="Asked to never be contacted",
        actor=admin.user,
    )
    provenance = {
        "model": "claude-sonnet-4.5",
        "prompt_version": "refunds-v7",
        "sources": [
            {"title": "Refund policy (EU)", "url": "kb://policies/refunds-eu"},
            {"title": "Order #48213"},
        ],
    }

    def draft(subject, to, text, minutes_ago, **kw):
        d = services.draft_create(
            tenant=tenant,
            mailbox=mailbox,
            to=to,
            subject=subject,
            text=text,
            agent_token=bot,
            provenance=provenance,
            **kw,
        )
        Draft.objects.filter(pk=d.pk).update(
            created_at=timezone.now() - timedelta(minutes=minutes_ago),
            review_deadline=timezone.now() + timedelta(hours=24) - timedelta(minutes=minutes_ago),
        )
        return d

    thread = "thr_48213"
    now = timezone.now()
    InboundMessage.objects.create(
        tenant=tenant,
        mailbox=mailbox,
        thread_id=thread,
        message_id="<q1@mail.example.com>",
        sender="Maria Lopez <maria.lopez@example.com>",
        subject="Refund for order 48213",
        preview="Hi, the blender arrived broken. Can I get my money back? Order 48213.",
        received_at=now - timedelta(hours=5, minutes=10),
    )
    main = draft(
        "Re: Refund for order 48213",
        ["maria.lopez@example.com"],
        "Hi Maria,\n\nI'm sorry the blender arrived broken. We have refunded 49.90 EUR to your card; "
        "it will show within 5 working days.\n\nBest regards,\nAcme Support",
        300,
        cc=["bounced@oldmail.test", "partner@reseller.test"],
        thread_id=thread,
        in_reply_to="<q1@mail.example.com>",
    )
    InboundMessage.objects.create(
        tenant=tenant,
        mailbox=mailbox,
        thread_id=thread,
        message_id="<q2@mail.example.com>",
        sender="Maria Lopez <maria.lopez@example.com>",
        subject="Re: Refund for order 48213",
        preview="Also, I'd rather have a replacement than a refund if possible!",
        received_at=now - timedelta(minutes=20),
    )
    services.draft_add_version(
        tenant=tenant,
        draft_id=main.pk,
        to=["maria.lopez@example.com"],
        cc=["bounced@oldmail.test", "partner@reseller.test"],
        bcc=[],
        subject="Re: Refund for order 48213",
        text="Hi Maria,\n\nI'm so sorry the blender arrived broken. We have refunded the full 49.90 EUR "
        "to your card; it will show within 3 to 5 working days. A prepaid return label is attached.\n\n"
        "Best regards,\nAda from Acme Support",
        html="",
        actor_user=admin.user,
    )
    others = [
        ("Where is my parcel?", "tom@example.org", 250),
        ("Invoice for March", "billing@bigcorp.example", 95),
        ("Change of delivery address", "li.wei@example.net", 70),
        ("Cancel my subscription", "sam@example.com", 42),
        ("Warranty question (coffee grinder)", "jo@example.com", 12),
        ("Discount code not working", "kim@example.com", 3),
    ]
    for subject, to, minutes in others:
        draft(
            subject,
            [to],
            f"Hello,\n\nThanks for writing about: {subject.lower()}.\n\nBest regards",
            minutes,
        )

    def intent_in(state, subject, to, **fields):
        d = draft(subject, [to], "Hello,\n\nYour replacement ships today.\n\nBest regards", 600)
        v = d.versions.get()
        i = services.draft_approve(
            tenant=tenant, draft_id=d.pk, version=1, content_hash=v.content_hash, actor=admin.user
        )
        if state != "accepted":
            SendIntent.objects.filter(pk=i.pk).update(state=state, **fields)
        return i

    for n in range(3):
        intent_in("accepted", f"Replacement for order 4800{n}", f"customer{n}@example.com")
    tasks.drain()
    stuck = intent_in(
        "needs_attention",
        "Your account was closed",
        "ex.customer@example.com",
        attempts=3,
        last_error_code="read_timeout",
        last_error_detail="No answer within 15 s after the request was written; lookup by label found nothing.",
    )
    for number, outcome, status, code in (
        (1, "uncertain", None, "read_timeout"),
        (2, "uncertain", 503, "server_error"),
        (3, "not_found", 200, ""),
    ):
        SendAttempt.objects.create(
            intent=stuck,
            tenant=tenant,
            number=number,
            kind="send" if number == 1 else ("replay" if number == 2 else "lookup"),
            worker="web-1:worker-2",
            started_at=now - timedelta(hours=24 - number),
            finished_at=now - timedelta(hours=24 - number),
            outcome=outcome,
            http_status=status,
            error_code=code,
            latency_ms=15000 if number == 1 else 230,
        )
    intent_in(
        "failed",
        "Quote for 40 grinders",
        "buyer@wholesale.test",
        attempts=1,
        last_error_code="validation_error",
        last_error_detail="422: the recipient domain does not accept mail",
    )
    intent_in(
        "queued",
        "Re: Refund for order 47001",
        "pat@example.com",
        # As the webhook applier holds it (its reason is shown in the reader's language).
        held_reason=HOLD_REASON,
    )
    # Bounced after the agent wrote the draft: the review page must flag it.
    Suppression.objects.create(
        tenant=tenant, address="bounced@oldmail.test", reason="bounced", source="evt_81"
    )
    return main


SHOTS = [
    ("queue", "/t/{slug}/", False),
    ("draft", "/t/{slug}/drafts/{draft}/", True),
    ("outbox", "/t/{slug}/outbox/", False),
    ("attention", "/t/{slug}/attention/", False),
    ("admin-health", "/t/{slug}/admin/", False),
    ("admin-members", "/t/{slug}/admin/members/", False),
    ("admin-suppressions", "/t/{slug}/admin/suppressions/", False),
    ("admin-audit", "/t/{slug}/admin/audit/", False),
    ("edit", "/t/{slug}/drafts/{draft}/edit/", True),
    ("queue-newest-page2", "/t/{slug}/?sort=newest&after={newest_cursor}", False),
    ("admin-member", "/t/{slug}/admin/members/{member}/", False),
    ("admin-member-deactivate", "/t/{slug}/admin/members/{member}/deactivate/", False),
    ("admin-token-revoke", "/t/{slug}/admin/tokens/{token}/revoke/", False),
    ("admin-policies", "/t/{slug}/admin/policies/", True),
    ("admin-mailboxes", "/t/{slug}/mailboxes/", False),
    ("admin-mailbox", "/t/{slug}/mailboxes/{mailbox}/", False),
]


def test_take_screenshots(page, transactional_db, tenant_a, member_of, mailbox_factory):
    admin = member_of(tenant_a, "admin")
    admin.user.full_name = "Ada Admin"
    admin.user.save(update_fields=["full_name"])
    mailbox = mailbox_factory(tenant_a, username="acme-support")
    main = build(tenant_a, admin, mailbox, member_of)
    Membership.objects.filter(pk=admin.pk).update(created_at=F("created_at"))
    tenant_a.own_domains = ["acme.test"]
    tenant_a.save(update_fields=["own_domains"])
    ids = {
        "slug": tenant_a.slug,
        "draft": main.pk,
        "member": Membership.objects.filter(tenant=tenant_a, role="viewer").first().pk,
        "token": AgentToken.objects.filter(tenant=tenant_a).first().pk,
        "mailbox": mailbox.pk,
        "newest_cursor": queries.queue_page(
            tenant=tenant_a, f=QueueFilter(), sort="newest", limit=3
        ).next_cursor,
    }
    sign_in(page, admin.user)
    OUT.mkdir(parents=True, exist_ok=True)
    for width, height, suffix in ((1280, 900, "desktop"), (390, 844, "phone")):
        page.set_viewport_size({"width": width, "height": height})
        for name, path, full in SHOTS:
            page.goto(path.format(**ids))
            if name == "queue":
                page.keyboard.press("j")
                page.keyboard.press("j")
            page.screenshot(
                path=str(OUT / f"ui-{name}-{suffix}.png"), full_page=full and suffix == "desktop"
            )
