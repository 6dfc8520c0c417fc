"""axe-core (axe-playwright-python) over every staff page, with realistic data (the screenshot
scene of tests/ui/shoot_screenshots.py): no critical or serious violation on any of them.

To add a page, add a line to STAFF_PAGES: its name and its path, formatted with the ids below.
"""

from datetime import timedelta

import pytest
from axe_playwright_python.sync_playwright import Axe
from django.utils import timezone

from intents import services
from intents.models import Draft, SendIntent
from intents.services.deadlines import drafts_escalate_due, drafts_warn_due
from tenants import invitations
from tenants.models import AgentToken, Membership
from tests.browser import BROWSER_MARKS, sign_in
from tests.ui.shoot_screenshots import build

pytestmark = BROWSER_MARKS

STAFF_PAGES = [
    ("queue", "/t/{slug}/"),
    ("queue, filtered", "/t/{slug}/?warnings=on&age=1h"),
    ("queue, mine", "/t/{slug}/?view=mine"),
    ("queue, unassigned", "/t/{slug}/?view=unassigned"),
    ("queue, escalated", "/t/{slug}/?view=escalated"),
    ("queue, by time left", "/t/{slug}/?sort=due"),
    ("draft", "/t/{slug}/drafts/{draft}/"),
    ("edit", "/t/{slug}/drafts/{draft}/edit/"),
    ("draft with hostile HTML", "/t/{slug}/drafts/{hostile}/"),
    ("edit with hostile HTML", "/t/{slug}/drafts/{hostile}/edit/"),
    ("outbox", "/t/{slug}/outbox/"),
    ("intent", "/t/{slug}/outbox/{intent}/"),
    ("attention", "/t/{slug}/attention/"),
    ("broadcasts", "/t/{slug}/broadcasts/"),
    ("broadcast create", "/t/{slug}/broadcasts/new/"),
    ("admin home", "/t/{slug}/admin/"),
    ("members and invitations", "/t/{slug}/admin/members/"),
    ("member", "/t/{slug}/admin/members/{member}/"),
    ("deactivate confirm", "/t/{slug}/admin/members/{member}/deactivate/"),
    ("tokens", "/t/{slug}/admin/tokens/"),
    ("token revoke confirm", "/t/{slug}/admin/tokens/{token}/revoke/"),
    ("mailboxes", "/t/{slug}/mailboxes/"),
    ("mailbox", "/t/{slug}/mailboxes/{mailbox}/"),
    ("mailbox create", "/t/{slug}/mailboxes/new/"),
    ("policies", "/t/{slug}/admin/policies/"),
    ("recipients", "/t/{slug}/admin/recipients/"),
    ("suppressions", "/t/{slug}/admin/suppressions/"),
    ("webhooks", "/t/{slug}/admin/webhooks/"),
    ("audit", "/t/{slug}/admin/audit/"),
    ("admin sign-in", "/t/{slug}/admin/sign-in/"),
    ("preferences", "/preferences/"),
    ("account security", "/account/security/"),
    ("sessions", "/account/sessions/"),
]
# Pages a signed-out person sees.
PUBLIC_PAGES = [
    ("sign-in", "/signin/"),
    ("single sign-on", "/sso/"),
    ("invitation", "/invitations/{invitation_token}/"),
]
BLOCKING = {"critical", "serious"}

HOSTILE_HTML = (
    "<p>Hi</p><script>parent.document.title='pwned';window.top.pwned=1</script>"
    "<img src=x onerror=\"parent.document.title='pwned'\">"
    '<a href="javascript:parent.pwned=1">click</a>'
)


def _blocking(axe: Axe, page) -> list[str]:
    results = axe.run(page)
    return [
        f"{v['id']} ({v['impact']}): {v['help']} at "
        + "; ".join(n["target"][0] for n in v["nodes"][:3])
        for v in results.response["violations"]
        if v["impact"] in BLOCKING
    ]


@pytest.fixture
def scene(transactional_db, tenant_a, member_of, mailbox_factory):
    admin = member_of(tenant_a, "admin")
    admin.user.full_name = "Ada Admin"
    admin.user.save(update_fields=["full_name"])
    mailbox = mailbox_factory(tenant_a)
    main = build(tenant_a, admin, mailbox, member_of)
    hostile = services.draft_create(
        tenant=tenant_a,
        mailbox=mailbox,
        to=["maria.lopez@example.com"],
        subject="HTML that tries to run",
        text="Hello",
        html=HOSTILE_HTML,
        actor_user=admin.user,
    )
    # Team review on: a draft held by the admin with a note, another escalated past its deadline.
    pending = list(Draft.objects.filter(tenant=tenant_a, status="pending").order_by("pk")[:2])
    services.draft_take(tenant=tenant_a, draft_id=pending[0].pk, actor=admin.user)
    services.draft_note_add(
        tenant=tenant_a, draft_id=pending[0].pk, author=admin.user, text="Check the refund amount."
    )
    tenant_a.sla_minutes, tenant_a.escalate_to = 30, admin.user
    tenant_a.save(update_fields=["sla_minutes", "escalate_to"])
    Draft.objects.filter(pk=pending[1].pk).update(
        sla_due_at=timezone.now() - timedelta(minutes=5),
        sla_warn_at=timezone.now() - timedelta(minutes=10),
    )
    drafts_warn_due()
    drafts_escalate_due()
    assert Draft.objects.filter(pk=pending[1].pk, escalated_at__isnull=False).exists()
    _, token = invitations.invitation_create(
        tenant=tenant_a, email="second.hire@acme.test", role="viewer", actor=admin.user
    )
    ids = {
        "slug": tenant_a.slug,
        "draft": main.pk,
        "hostile": hostile.pk,
        "intent": SendIntent.objects.filter(tenant=tenant_a, state="needs_attention").first().pk,
        "member": Membership.objects.filter(tenant=tenant_a, role="viewer").first().pk,
        "token": AgentToken.objects.filter(tenant=tenant_a, revoked_at=None).first().pk,
        "mailbox": mailbox.pk,
        "invitation_token": token,
    }
    return {"admin": admin, "ids": ids}


def test_no_staff_page_has_a_critical_or_serious_violation(page, chromium, live_server, scene):
    axe = Axe()
    found: dict[str, list[str]] = {}
    for name, path in PUBLIC_PAGES:
        page.goto(path.format(**scene["ids"]))
        found[name] = _blocking(axe, page)
    sign_in(page, scene["admin"].user)
    for name, path in STAFF_PAGES:
        response = page.goto(path.format(**scene["ids"]))
        assert response is not None and response.status == 200, name
        found[name] = _blocking(axe, page)
    blocking = {name: v for name, v in found.items() if v}
    assert not blocking, "\n".join(f"{name}: {v}" for name, vs in blocking.items() for v in vs)


def test_hostile_html_never_runs_in_the_draft_page_or_the_editor_preview(page, scene):
    sign_in(page, scene["admin"].user)
    ids = scene["ids"]
    for path in ("/t/{slug}/drafts/{hostile}/", "/t/{slug}/drafts/{hostile}/edit/"):
        page.goto(path.format(**ids))
        page.wait_for_timeout(300)
        assert page.evaluate("document.title") != "pwned"
        assert page.evaluate("window.pwned === undefined")
        assert page.locator("iframe[sandbox='']").count() == 1
    # The editor's live preview follows the textarea, still in the sandbox.
    page.fill("textarea[name=html]", "<p data-x>typed</p><script>parent.pwned=2</script>")
    frame = page.frame_locator("iframe[data-html-preview]")
    assert frame.locator("p[data-x]").inner_text() == "typed"
    assert page.evaluate("window.pwned === undefined")
