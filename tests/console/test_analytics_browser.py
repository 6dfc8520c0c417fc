"""Console → Reviewer analytics in Chromium: one screenshot to look at (written to
``.data/screenshots/reviewer-analytics.png``) and axe-core over the page."""

from __future__ import annotations

from pathlib import Path

import pytest
from axe_playwright_python.sync_playwright import Axe

from tests.browser import BROWSER_MARKS, sign_in
from tests.intents.analytics_seed import seed_history

pytestmark = BROWSER_MARKS

OUT = Path(__file__).resolve().parents[2] / ".data" / "screenshots"


@pytest.mark.django_db(transaction=True)
def test_the_page_renders_its_chart_and_passes_axe(page, live_server, tenant_a, tenant_b):
    seeded = seed_history(tenant_a, tenant_b)
    sign_in(page, seeded.admin)
    response = page.goto(f"/t/{tenant_a.slug}/admin/analytics/")
    OUT.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(OUT / "reviewer-analytics.png"), full_page=True)
    violations = [
        f"{v['id']} ({v['impact']}): {v['help']}"
        for v in Axe().run(page).response["violations"]
        if v["impact"] in {"critical", "serious"}
    ]
    assert response is not None and response.status == 200
    assert page.locator("svg[role=img] rect").count() == 13
    assert page.locator("svg[role=img] title").first.text_content() == (
        "Outcomes of the agents' drafts per token"
    )
    assert violations == []
