"""A broadcast approved in headless Chromium: the sample message, the filtered recipients, the
approval, then the sends through the sandbox by the real worker code and the progress counts."""

from pathlib import Path

from intents.models import Broadcast, Suppression
from intents.sending.fanout import broadcast_run
from intents.services.broadcasts import broadcast_create
from tests.browser import BROWSER_MARKS, shot, sign_in
from tests.intents.helpers import drain_sends

pytestmark = BROWSER_MARKS


def test_approve_a_broadcast_and_follow_its_progress(page, shop, settings):
    settings.BROADCAST_RATE_PER_SECOND = 5
    Suppression.objects.create(tenant=shop["tenant"], address="c3@example.com", reason="bounced")
    broadcast = broadcast_create(
        tenant=shop["tenant"],
        mailbox=shop["mailbox"],
        name="Warehouse outage",
        subject="Your order {{ order }} is delayed",
        text="Hello {{ name }},\n\nyour order {{ order }} ships next week.\n\nSorry!",
        recipients=[
            {"address": f"c{i}@example.com", "variables": {"name": f"Kim {i}", "order": f"A{i}"}}
            for i in range(5)
        ],
    )
    sign_in(page, shop["admin"].user)
    page.goto(f"/t/{shop['tenant'].slug}/broadcasts/")
    page.click(f"[data-broadcast='{broadcast.pk}'] a")
    page.wait_for_url(f"**/broadcasts/{broadcast.pk}/")
    assert page.locator("[data-sample-subject]").inner_text() == "Your order A0 is delayed"
    assert "Hello Kim 0," in page.locator("[data-sample-text]").inner_text()
    assert page.locator("[data-skipped=suppressed]").count() == 1
    assert page.locator("[data-recipient-count]").inner_text() == "5"
    shot(page, "broadcast-review")
    with page.expect_download() as download:
        page.click("[data-recipients-csv]")
    rows = Path(download.value.path()).read_text().splitlines()
    assert rows[0] == "row,address,name,order" and len(rows) == 6
    assert rows[5] == "5,c4@example.com,Kim 4,A4"
    page.click("[data-approve]")
    page.wait_for_selector("[data-broadcast-state=approved]")
    assert Broadcast.objects.get(pk=broadcast.pk).approved_by == shop["admin"].user
    broadcast_run(broadcast.pk)
    drain_sends()
    page.reload()
    assert page.locator("[data-count=accepted]").inner_text() == "4 / 4"
    assert page.locator("[data-pause]").count() == 1
    shot(page, "broadcast-sending")


def test_post_a_broadcast_from_the_browser_with_a_csv(page, shop):
    bad = (
        "address,name,order\nnot-an-address,Kim,A1\nlee@example.com,Lee,A2\nLEE@example.com,Bo,A3\n"
    )
    good = "address,name,order\nkim@example.com,Kim,A1\nlee@example.com,Lee,A2\n"
    sign_in(page, shop["admin"].user)
    page.goto(f"/t/{shop['tenant'].slug}/broadcasts/")
    page.click("[data-new-broadcast]")
    page.wait_for_url("**/broadcasts/new/")
    page.select_option("select[name=mailbox]", str(shop["mailbox"].pk))
    page.fill("input[name=name]", "Warehouse outage")
    page.fill("input[name=subject]", "Your order {{ order }} is delayed")
    page.fill("textarea[name=text]", "Hello {{ name }},\n\nyour order {{ order }} ships next week.")
    upload = {"name": "customers.csv", "mimeType": "text/csv"}
    page.set_input_files("input[name=recipients]", files=[{**upload, "buffer": bad.encode()}])
    page.click("[data-post-broadcast]")
    page.wait_for_selector("[data-bad-rows]")
    assert page.locator("[data-bad-row]").count() == 2
    assert "Row 1" in page.locator("[data-bad-row='1']").inner_text()
    assert page.locator("[data-bad-row='3']").inner_text().startswith("Row 3, address")
    assert page.input_value("input[name=subject]") == "Your order {{ order }} is delayed"
    assert not Broadcast.objects.exists()
    shot(page, "broadcast-new-bad-rows")
    page.set_input_files("input[name=recipients]", files=[{**upload, "buffer": good.encode()}])
    page.click("[data-post-broadcast]")
    page.wait_for_selector("[data-broadcast-state=pending_review]")
    broadcast = Broadcast.objects.get()
    assert page.url.endswith(f"/broadcasts/{broadcast.pk}/")
    assert (broadcast.created_by, broadcast.recipient_count) == (shop["admin"].user, 2)
    assert page.locator("[data-sample-subject]").inner_text() == "Your order A1 is delayed"
    shot(page, "broadcast-new-posted")


def test_approve_a_broadcast_see_the_countdown_click_undo_nothing_sent(page, shop, sandbox):
    from intents.models import SendIntent
    from tenants.models import Tenant
    from tests.intents.conftest import start_worker

    Tenant.objects.filter(pk=shop["tenant"].pk).update(send_hold_seconds=5)
    broadcast = broadcast_create(
        tenant=shop["tenant"],
        mailbox=shop["mailbox"],
        subject="Your order is delayed",
        text="Hello {{ name }}",
        recipients=[{"address": f"u{i}@example.com", "variables": {"name": i}} for i in range(3)],
    )
    ledger_before = len(sandbox.ledger())
    worker = start_worker(sandbox, "--seconds", "14", "--poll", "0.1", "--sweep-every", "0.5")
    try:
        sign_in(page, shop["admin"].user)
        page.goto(f"/t/{shop['tenant'].slug}/broadcasts/{broadcast.pk}/")
        page.click("[data-approve]")
        page.wait_for_selector("[data-broadcast-state=approved]")
        countdown = page.locator("[data-undo-box] [data-countdown]")
        first = int(countdown.inner_text())
        assert 1 <= first <= 5
        page.wait_for_function(
            "n => Number(document.querySelector('[data-undo-box] [data-countdown]')"
            ".textContent) < n",
            arg=first,
        )
        page.locator("[data-undo-box] [data-undo-button]").click()
        page.wait_for_selector("[data-broadcast-state=pending_review]")
        assert page.locator(".flash .success", has_text="Undone").count() == 1
        assert page.locator("[data-approve]").count() == 1  # a fresh approval is needed
        assert Broadcast.objects.get(pk=broadcast.pk).hold_until is None
        page.wait_for_timeout((first + 2) * 1000)  # past the window, the worker still sweeping
        assert worker.poll() is None
    finally:
        worker.terminate()
        worker.communicate(timeout=30)
    assert Broadcast.objects.get(pk=broadcast.pk).state == "pending_review"
    assert not SendIntent.objects.filter(broadcast=broadcast).exists()
    assert len(sandbox.ledger()) == ledger_before


def test_the_countdown_of_a_broadcast_paused_inside_its_window_says_it_is_paused(page, shop):
    """Found by a probe: the countdown of a broadcast paused inside its undo window said
    "Sending in 40 seconds", then "The undo window has closed; it is on its way": nothing of a
    paused broadcast goes out until someone resumes it."""
    from intents.services.broadcast_controls import broadcast_pause
    from tenants.models import Tenant

    Tenant.objects.filter(pk=shop["tenant"].pk).update(send_hold_seconds=40)
    broadcast = broadcast_create(
        tenant=shop["tenant"],
        mailbox=shop["mailbox"],
        subject="Your order is delayed",
        text="Hello {{ name }}",
        recipients=[{"address": f"u{i}@example.com", "variables": {"name": i}} for i in range(3)],
    )
    sign_in(page, shop["admin"].user)
    page.goto(f"/t/{shop['tenant'].slug}/broadcasts/{broadcast.pk}/")
    page.click("[data-approve]")
    page.wait_for_selector("[data-broadcast-state=approved]")
    broadcast_pause(tenant=shop["tenant"], broadcast_id=broadcast.pk, actor=shop["admin"].user)
    page.clock.install()  # the countdown's timers run when told, not in real seconds
    page.reload()
    page.wait_for_selector("[data-broadcast-state=paused]")
    box = page.locator("[data-undo-box]")
    opened = box.locator("[data-undo-open]").inner_text()
    shot(page, "broadcast-paused-undo-open")

    page.clock.run_for(41_000)

    box.locator("[data-undo-closed]").wait_for(state="visible")
    closed = box.locator("[data-undo-closed]").inner_text()
    shot(page, "broadcast-paused-undo-closed")
    assert opened.startswith("Paused: nothing is sent until someone resumes it.")
    assert "Sending in" not in opened
    assert closed == (
        "The undo window has closed. It is paused: cancel it to send nothing more, or resume it "
        "to send the rest."
    )
    assert box.locator("[data-undo-status]").inner_text() == closed
    assert box.locator("[data-undo-button]").is_hidden()
