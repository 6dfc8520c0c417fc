"""Screenshots of Console -> Agent events for docs/screenshots (run on demand):

COUNTERSIGN_ENV=test .venv/bin/pytest tests/ui/shoot_agent_events.py
"""

from pathlib import Path

import pytest
from django.conf import settings

from intents import services
from intents.events.delivery import deliver_due
from intents.services.event_endpoints import endpoint_create, endpoint_disable
from tests.browser import sign_in
from tests.factories import make_local_mailbox

OUT = Path(settings.BASE_DIR) / "docs" / "screenshots"
pytestmark = pytest.mark.browser


def test_shoot_agent_events(page, transactional_db, tenant_a, member_of, receiver, subscribe):
    ben = member_of(tenant_a, "admin", user__full_name="Ben Lead").user
    mailbox = make_local_mailbox(tenant_a)
    subscribe(tenant_a, receiver, types=["draft.approved", "draft.edited", "draft.rejected"])
    off, _ = endpoint_create(
        tenant=tenant_a,
        url="https://agent.example.com/countersign",
        event_types=["send.bounced"],
        mailbox_id=mailbox.pk,
        description="Billing agent",
        actor=ben,
    )
    endpoint_disable(tenant=tenant_a, endpoint_id=off.pk, actor=ben)
    for i in range(3):
        draft = services.draft_create(
            tenant=tenant_a,
            mailbox=mailbox,
            to=[f"customer{i}@example.com"],
            subject=f"Question {i}",
            text="Hello",
            actor_user=ben,
        )
        services.draft_reject(tenant=tenant_a, draft_id=draft.pk, reason="Tone", actor=ben)
    receiver.fail_next = 1
    deliver_due(limit=1)
    page.set_default_timeout(60_000)
    sign_in(page, ben)
    OUT.mkdir(parents=True, exist_ok=True)
    for width, suffix in ((1280, "desktop"), (390, "phone")):
        page.set_viewport_size({"width": width, "height": 900})
        page.goto(f"/t/{tenant_a.slug}/admin/agent-events/")
        page.screenshot(path=str(OUT / f"ui-admin-agent-events-{suffix}.png"), full_page=True)
