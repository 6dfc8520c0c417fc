"""Screenshots of the review pages in German at 1280 px and in Spanish at 390 px, with the data of
the languages acceptance test (run on demand, not in CI):

COUNTERSIGN_ENV=test .venv/bin/pytest tests/ui/shoot_languages.py
"""

from pathlib import Path

import pytest
from django.conf import settings

from intents.services.presence import presence_beat
from tests.browser import sign_in
from tests.review.test_browser_languages import build_team

OUT = Path(settings.BASE_DIR) / "docs" / "screenshots"
pytestmark = pytest.mark.browser


def test_shoot_review_pages_in_german_and_spanish(
    chromium, live_server, transactional_db, tenant_a, member_of
):
    team = build_team(tenant_a, member_of)
    tenant, held = team["tenant"], team["held"]
    OUT.mkdir(parents=True, exist_ok=True)
    for who, other, lang, name, width in (
        ("dieter", "lucia", "de", "desktop", 1280),
        ("lucia", "dieter", "es", "phone", 390),
    ):
        context = chromium.new_context(
            viewport={"width": width, "height": 900}, base_url=live_server.url, locale="en-US"
        )
        page = context.new_page()
        sign_in(page, team[who])
        presence_beat(tenant=tenant, draft_id=held.pk, user=team[other], mode="viewing")
        page.goto(f"/t/{tenant.slug}/")
        page.screenshot(path=str(OUT / f"ui-queue-{lang}-{name}.png"), full_page=True)
        page.goto(f"/t/{tenant.slug}/drafts/{held.pk}/")
        page.wait_for_selector(f'[data-presence] [data-present="{team[other].email}"]')
        page.screenshot(path=str(OUT / f"ui-draft-{lang}-{name}.png"), full_page=True)
        page.goto(f"/t/{tenant.slug}/outbox/")
        page.screenshot(path=str(OUT / f"ui-outbox-{lang}-{name}.png"), full_page=True)
        context.close()
