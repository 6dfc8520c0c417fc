"""In headless Chromium: what a person types in the editor survives a save that the server
refused before the view ran (the session expired, the CSRF token went stale). The tab keeps it
and the edit page offers it back; restoring a text typed on an older version is shown as a
conflict, never saved over a colleague's version; another person signing in to the same tab is
never offered it; a successful save, Cancel or signing out forgets it."""

import re
from datetime import datetime
from zoneinfo import ZoneInfo

from django.contrib.sessions.models import Session

from intents import services
from intents.models import DraftVersion
from tests.browser import BROWSER_MARKS, new_draft, sign_in
from tests.factories import PASSWORD

pytestmark = BROWSER_MARKS

TYPED = "Hello,\n\nWe refunded your order yesterday, and the courier collects the box.\n\nAna"


def _sign_in_here(page, user, next_path):
    """The sign-in page a refused save led to: sign in there and land where it points."""
    page.wait_for_url(re.compile(r"/signin/"))
    page.fill("input[name=username]", user.email)
    page.fill("input[name=password]", PASSWORD)
    page.click("button[type=submit]")
    page.wait_for_url(f"**{next_path}")


def test_text_typed_before_the_session_expired_is_offered_back_and_saved(page, shop):
    draft = new_draft(shop)
    user = shop["admin"].user
    user.time_zone = "Asia/Kathmandu"  # UTC+05:45: the offer's time is in the person's zone
    user.save(update_fields=["time_zone"])
    edit = f"/t/{shop['tenant'].slug}/drafts/{draft.pk}/edit/"
    sign_in(page, user)
    page.goto(edit)
    page.fill("textarea[name=text]", TYPED)
    page.wait_for_timeout(400)  # the keeper writes 300 ms after the last keystroke
    Session.objects.all().delete()  # the session ends on the server while the person types

    page.click("button.primary")
    _sign_in_here(page, user, edit)

    offer = page.locator("[data-unsaved-offer]")
    assert offer.is_visible()
    assert "on version 1" in offer.inner_text()
    key = f"cs-unsaved:{user.pk}:{shop['tenant'].pk}:{draft.pk}"
    kept_at = page.evaluate(f"JSON.parse(sessionStorage.getItem('{key}')).at")
    local = datetime.fromtimestamp(kept_at / 1000, ZoneInfo("Asia/Kathmandu"))
    assert f"at {local:%H:%M}," in offer.inner_text()
    assert page.locator("[data-unsaved-newer]").is_hidden()
    assert page.input_value("textarea[name=text]") != TYPED  # the page shows version 1
    page.click("[data-unsaved-restore]")
    assert page.input_value("textarea[name=text]") == TYPED
    page.click("button.primary")
    page.wait_for_url(f"**/drafts/{draft.pk}/")
    assert DraftVersion.objects.get(draft=draft, number=2).text == TYPED
    assert page.evaluate(KEPT) == 0  # the page that says "Saved version 2" forgot it


def test_a_stale_csrf_token_loses_nothing_and_another_person_is_never_offered_it(
    page, shop, member_of
):
    draft = new_draft(shop)
    edit = f"/t/{shop['tenant'].slug}/drafts/{draft.pk}/edit/"
    sign_in(page, shop["admin"].user)
    page.goto(edit)
    page.fill("textarea[name=text]", TYPED)
    page.context.clear_cookies(name="cs_csrf")  # signed in again elsewhere: a new token
    page.click("button.primary")
    page.wait_for_load_state()
    assert DraftVersion.objects.filter(draft=draft).count() == 1  # refused: nothing saved

    # The draft's page opened from the queue after the refusal is no sign of a save.
    page.goto(f"/t/{shop['tenant'].slug}/drafts/{draft.pk}/")
    assert page.evaluate(KEPT) == 1
    page.goto(edit)
    assert page.locator("[data-unsaved-offer]").is_visible()

    # The session ends, a colleague signs in on the same tab: the kept text is not theirs.
    colleague = member_of(shop["tenant"], "admin").user
    page.context.clear_cookies()
    sign_in(page, colleague)
    page.goto(edit)
    assert page.locator("[data-unsaved-offer]").is_hidden()
    # Signing out forgets every kept text of the tab.
    assert page.evaluate(KEPT) == 1
    page.click("text=Sign out")
    page.wait_for_load_state()
    assert page.evaluate(KEPT) == 0


KEPT = "Object.keys(sessionStorage).filter(k => k.startsWith('cs-unsaved:')).length"


def test_restoring_text_typed_on_an_older_version_shows_the_conflict(page, shop):
    draft = new_draft(shop)
    user = shop["admin"].user
    edit = f"/t/{shop['tenant'].slug}/drafts/{draft.pk}/edit/"
    sign_in(page, user)
    page.goto(edit)
    page.fill("textarea[name=text]", TYPED)
    page.wait_for_timeout(400)
    Session.objects.all().delete()
    page.click("button.primary")
    # Meanwhile a colleague's agent saves version 2.
    current = draft.versions.get(number=1)
    services.draft_add_version(
        tenant=shop["tenant"],
        draft_id=draft.pk,
        base_version=1,
        to=current.to,
        cc=[],
        bcc=[],
        subject=current.subject,
        text="Hello,\n\nA colleague's version.\n\nBest regards",
        html="",
        actor_user=user,
    )
    _sign_in_here(page, user, edit)

    assert page.locator("[data-unsaved-newer]").is_visible()
    page.click("[data-unsaved-restore]")
    page.click("button.primary")
    page.wait_for_load_state()
    assert page.locator("[data-edit-conflict]").is_visible()  # shown, not saved over version 2
    assert DraftVersion.objects.filter(draft=draft).count() == 2
    assert page.input_value("textarea[name=text]") == TYPED  # and still in the form


def test_cancel_forgets_the_kept_text(page, shop):
    draft = new_draft(shop)
    edit = f"/t/{shop['tenant'].slug}/drafts/{draft.pk}/edit/"
    sign_in(page, shop["admin"].user)
    page.goto(edit)
    page.fill("textarea[name=text]", TYPED)
    page.wait_for_timeout(400)
    page.click("text=Cancel")
    page.wait_for_url(f"**/drafts/{draft.pk}/")
    page.goto(edit)
    assert page.locator("[data-unsaved-offer]").is_hidden()


def test_the_last_keystrokes_are_kept_when_a_heartbeat_takes_the_tab_to_sign_in(page, shop):
    """The session ends while the person types: the editor's next presence beat takes the tab
    to the sign-in page (tenants.signin_redirect) sooner than the keeper's 300 ms pause."""
    draft = new_draft(shop)
    user = shop["admin"].user
    edit = f"/t/{shop['tenant'].slug}/drafts/{draft.pk}/edit/"
    sign_in(page, user)
    page.goto(edit)
    page.wait_for_load_state("networkidle")
    Session.objects.all().delete()

    page.fill("textarea[name=text]", TYPED)
    page.locator("[data-presence]").evaluate(
        "el => { htmx.ajax('POST', el.getAttribute('hx-post'), {source: el, target: el}); }"
    )
    _sign_in_here(page, user, edit)

    assert page.locator("[data-unsaved-offer]").is_visible()
    page.click("[data-unsaved-restore]")
    assert page.input_value("textarea[name=text]") == TYPED
