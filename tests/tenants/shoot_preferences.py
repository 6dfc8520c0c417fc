"""Screenshots of the preferences page (German) and the sign-in page (Spanish browser) for
docs/screenshots (run on demand, not in CI):

COUNTERSIGN_ENV=test .tools/bin/uv run pytest tests/tenants/shoot_preferences.py
"""

from pathlib import Path

import pytest
from django.conf import settings

from tests.browser import sign_in

OUT = Path(settings.BASE_DIR) / "docs" / "screenshots"
pytestmark = pytest.mark.browser
SIZES = {"desktop": {"width": 1280, "height": 800}, "phone": {"width": 390, "height": 844}}


@pytest.mark.parametrize("size", SIZES)
def test_shoot(chromium, live_server, transactional_db, tenant_a, member_of, size):
    person = member_of(tenant_a, "approver").user
    person.full_name, person.language = "Greta Gruber", "de"
    person.save(update_fields=["full_name", "language"])
    context = chromium.new_context(
        base_url=live_server.url, viewport=SIZES[size], timezone_id="Europe/Berlin", locale="es-ES"
    )
    page = context.new_page()
    page.goto("/signin/")
    page.screenshot(path=OUT / f"signin-es-{size}.png", full_page=True)
    sign_in(page, person)
    page.goto("/preferences/")
    page.fill("#id_time_zone", "Mars/Olympus")
    page.click("button[type=submit]")
    page.screenshot(path=OUT / f"preferences-de-{size}.png", full_page=True)
    context.close()
