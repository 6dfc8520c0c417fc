"""An htmx request whose session is gone is told to take the tab to the sign-in page
(tenants.signin_redirect), with ``next`` the page the person was on, never the fragment's
address nor another site's; a page's own request keeps its plain redirect."""

from datetime import timedelta
from urllib.parse import parse_qs, urlsplit

import pytest
import time_machine
from django.urls import reverse
from django.utils import timezone

from intents.models import SendIntent
from tenants.models import UserSession
from tests.review.test_review import approve_data

pytestmark = pytest.mark.django_db


def _urls(tenant, draft):
    page = reverse("draft", args=[tenant.slug, draft.pk])
    return page, reverse("draft_approve", args=[tenant.slug, draft.pk])


def test_an_htmx_approve_after_the_session_expired_sends_the_tab_to_sign_in(
    client, tenant_a, mailbox_a, make_draft
):
    draft = make_draft(mailbox_a)
    page, approve = _urls(tenant_a, draft)

    answer = client.post(
        approve,
        approve_data(draft),
        headers={"HX-Request": "true", "HX-Current-URL": f"http://testserver{page}?view=mine"},
    )

    assert answer.status_code == 200 and not answer.has_header("Location")
    target = urlsplit(answer["HX-Redirect"])
    assert target.path == reverse("login")
    assert parse_qs(target.query) == {"next": [f"{page}?view=mine"]}
    assert "HX-Request" in answer["Vary"]
    assert not SendIntent.objects.exists()


def test_a_form_posted_after_the_session_expired_comes_back_to_its_page_after_sign_in(
    client, tenant_a, mailbox_a, make_draft
):
    """The redirect's ``next`` was the address the form posted to (``/approve/``, which answers
    only POST): signed in again, the person landed on a 405. It is the page the form was on (its
    same-origin Referer), where they may post again; the post itself did nothing."""
    draft = make_draft(mailbox_a)
    page, approve = _urls(tenant_a, draft)

    answer = client.post(
        approve, approve_data(draft), headers={"Referer": f"http://testserver{page}?view=mine"}
    )

    assert answer.status_code == 302 and not answer.has_header("HX-Redirect")
    target = urlsplit(answer["Location"])
    assert target.path == reverse("login")
    assert parse_qs(target.query) == {"next": [f"{page}?view=mine"]}
    assert not SendIntent.objects.exists()


@pytest.mark.parametrize("referer", [None, "https://evil.example/t/tenant-a/", "not a url"])
def test_a_form_posted_without_a_page_of_ours_to_return_to_signs_in_without_next(
    client, tenant_a, mailbox_a, make_draft, referer
):
    draft = make_draft(mailbox_a)
    _page, approve = _urls(tenant_a, draft)

    answer = client.post(
        approve, approve_data(draft), headers={"Referer": referer} if referer else {}
    )

    assert answer.status_code == 302
    assert answer["Location"] == reverse("login")


def test_a_page_opened_after_the_session_expired_keeps_its_plain_redirect(
    client, tenant_a, mailbox_a, make_draft
):
    draft = make_draft(mailbox_a)
    page, _approve = _urls(tenant_a, draft)

    answer = client.get(page, headers={"Referer": "http://testserver/elsewhere/"})

    assert answer.status_code == 302 and not answer.has_header("HX-Redirect")
    assert answer["Location"] == f"{reverse('login')}?next={page}"


@pytest.mark.parametrize(
    "current_url",
    [
        "https://evil.example/t/tenant-a/",
        "http://evil.example/t/tenant-a/",
        "http://testserver//evil.example/t/tenant-a/",
        "/t/tenant-a/",
        "javascript:alert(1)",
    ],
)
def test_an_address_of_another_site_is_never_the_next_page(
    client, tenant_a, mailbox_a, make_draft, current_url
):
    draft = make_draft(mailbox_a)
    _page, approve = _urls(tenant_a, draft)

    answer = client.post(
        approve, approve_data(draft), headers={"HX-Request": "true", "HX-Current-URL": current_url}
    )

    assert answer.status_code == 200
    assert answer["HX-Redirect"] == reverse("login")


def test_a_session_signed_out_elsewhere_is_sent_to_sign_in_by_the_gate_too(
    tenant_a, mailbox_a, make_draft, admin_a, signed_in
):
    """The sign-in gate signs out a session whose row was ended (another browser's "sign out
    everywhere", an admin's deactivation) and redirects it; an htmx beat is told the same."""
    draft = make_draft(mailbox_a)
    page, _approve = _urls(tenant_a, draft)
    client = signed_in(admin_a.user)
    ended, _ = UserSession.objects.filter(user=admin_a.user).delete()
    assert ended == 1

    # The gate looks for the session's row at most once a minute (tenants.user_sessions).
    with time_machine.travel(timezone.now() + timedelta(minutes=2)):
        answer = client.post(
            reverse("draft_presence", args=[tenant_a.slug, draft.pk]) + "?mode=viewing",
            headers={"HX-Request": "true", "HX-Current-URL": f"http://testserver{page}"},
        )

    assert answer.status_code == 200
    assert answer["HX-Redirect"] == f"{reverse('login')}?next={page}"
    assert "_auth_user_id" not in client.session
