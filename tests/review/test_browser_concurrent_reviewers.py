"""In Chromium, team review at the same moment: a reviewer's bulk approval posted after their
role was taken away, their membership ended or the tenant suspended, since the queue was loaded.
Each row says what the server answered; nothing is approved."""

import pytest
from playwright.sync_api import expect

from intents.models import SendIntent
from tenants.models import Membership, Tenant
from tests.browser import BROWSER_MARKS, new_draft, sign_in

pytestmark = BROWSER_MARKS


def _demoted(ana) -> None:
    Membership.objects.filter(pk=ana.pk).update(role="viewer")


def _removed(ana) -> None:
    Membership.objects.filter(pk=ana.pk).update(is_active=False)


def _suspended(ana) -> None:
    Tenant.objects.filter(pk=ana.tenant_id).update(status="suspended")


@pytest.mark.parametrize(
    "change, said",
    [
        (_demoted, "Your role does not allow this."),
        (_removed, "There is nothing here, or it is not yours to see."),
        (_suspended, "This tenant is suspended; it is read-only."),
    ],
)
def test_a_bulk_approval_refused_since_the_queue_was_loaded_says_why_on_each_row(
    page, shop, member_of, change, said
):
    ana = member_of(shop["tenant"], "approver")
    drafts = [new_draft(shop, subject=f"Bulk {n}") for n in range(2)]
    sign_in(page, ana.user)
    page.goto(f"/t/{shop['tenant'].slug}/")
    page.check("[data-select-all]")
    change(ana)
    page.click("[data-bulk-approve]")
    expect(page.locator("[data-bulk-progress]")).to_contain_text("0 of 2 approved, 2 refused")
    results = page.locator("[data-bulk-result=refused]")
    expect(results).to_have_count(2)
    assert results.all_text_contents() == [said, said]
    assert not SendIntent.objects.filter(draft__in=drafts).exists()
