"""In Chromium: a name refused for characters nobody sees (tests/console/test_probe_invisible_names.py)
is refused beside its field, and the field is described by that refusal, so a screen reader
reads it when the field takes focus. Screenshots go to $SCREENSHOT_DIR when it is set."""

import os
import re

from playwright.sync_api import expect

from tests.browser import BROWSER_MARKS, sign_in

pytestmark = BROWSER_MARKS

REFUSAL = "A name cannot hold characters nobody sees: U+200B ZERO WIDTH SPACE."
# Each id an aria-describedby of the page names that no element of the page carries.
UNRESOLVED = """() => [...document.querySelectorAll('[aria-describedby]')].flatMap(
  e => e.getAttribute('aria-describedby').split(/\\s+/).filter(id => id && !document.getElementById(id)))"""


def _shot(page, name: str) -> None:
    folder = os.environ.get("SCREENSHOT_DIR")
    if folder:
        page.screenshot(path=os.path.join(folder, f"{name}.png"), full_page=True)


def test_a_token_name_refused_is_the_description_of_its_field(page, shop):
    """Django marks the refused field aria-invalid and aria-describedby="id_name_helptext
    id_name_error", and the page gave neither id to the refusal or the help text: a screen
    reader announced an invalid field and not why."""
    sign_in(page, shop["admin"].user)
    page.goto(f"/t/{shop['tenant'].slug}/admin/tokens/new/")
    page.fill("input[name=name]", "support-bot\u200b")
    page.get_by_role("button", name="Create token").click()
    field = page.get_by_label("Name", exact=True)
    expect(field).to_have_attribute("aria-invalid", "true")
    _shot(page, "token-name-refused")

    assert page.evaluate(UNRESOLVED) == []
    expect(field).to_have_accessible_description(re.compile(re.escape(REFUSAL)))


def test_an_invited_persons_name_refused_is_the_description_of_its_field(page, shop):
    sign_in(page, shop["admin"].user)
    page.goto(f"/t/{shop['tenant'].slug}/admin/members/")
    page.fill("input[name=email]", "ana@example.test")
    page.fill("input[name=full_name]", "Ana\u200bPérez")
    page.get_by_role("button", name="Invite").click()
    field = page.locator("input[name=full_name]")
    expect(field).to_have_attribute("aria-invalid", "true")
    _shot(page, "invited-name-refused")

    assert page.evaluate(UNRESOLVED) == []
    expect(field).to_have_accessible_description(re.compile(re.escape(REFUSAL)))


def test_a_refusal_under_one_field_of_the_invite_row_leaves_the_fields_in_line(page, shop):
    """The invite form's row aligns its cells at their bottom: a refusal under the name pushed
    its label and field up, above the email and role fields beside them."""
    sign_in(page, shop["admin"].user)
    page.goto(f"/t/{shop['tenant'].slug}/admin/members/")
    page.fill("input[name=email]", "ana@example.test")
    page.fill("input[name=full_name]", "Ana\u200bPérez")
    page.get_by_role("button", name="Invite").click()
    name = page.locator("input[name=full_name]")
    expect(name).to_have_attribute("aria-invalid", "true")
    _shot(page, "invite-row-refused")

    tops = [page.locator(f"[name={f}]").bounding_box()["y"] for f in ("email", "role")]
    assert [round(top - name.bounding_box()["y"]) for top in tops] == [0, 0]
