"""Pages served to a signed-in person carry ``Cache-Control: no-store`` (tenants.private_pages):
found by an outside probe, every staff page (a customer's mail, the audit log, the sessions) was
served with no Cache-Control at all, so the browser kept it on disk after sign-out."""

import pytest
from django.urls import reverse

pytestmark = pytest.mark.django_db


def test_every_page_of_a_signed_in_person_is_stored_by_no_cache(
    signed_in, admin_a, mailbox_a, make_draft
):
    draft = make_draft(mailbox_a, text="Dear Ana, your IBAN ends in 4411.")
    client = signed_in(admin_a.user)
    slug = admin_a.tenant.slug
    urls = [
        reverse("tenant_home", args=[slug]),
        reverse("draft", args=[slug, draft.pk]),
        reverse("outbox", args=[slug]),
        reverse("admin_members", args=[slug]),
        reverse("admin_audit", args=[slug]),
        reverse("admin_audit_csv", args=[slug]),
        reverse("account_security"),
        reverse("sessions"),
        reverse("preferences"),
    ]

    answers = {url: client.get(url) for url in urls}

    assert {url: r.status_code for url, r in answers.items()} == {url: 200 for url in urls}
    controls = {url: set(r.get("Cache-Control", "").split(", ")) for url, r in answers.items()}
    assert all({"no-store", "private"} <= control for control in controls.values()), controls


def test_a_view_that_sets_its_own_cache_control_keeps_it(signed_in, admin_a):
    client = signed_in(admin_a.user)

    counts = client.get(reverse("nav_counts", args=[admin_a.tenant.slug]))
    asset = client.get(reverse("api_docs_asset", args=["swagger-ui.css"]))

    assert counts["Cache-Control"] == "no-store"
    assert asset["Cache-Control"] == "public, max-age=86400"
