"""Team review probed from outside: hostile form input, a right taken away between the page's
load and its submit, a person of two tenants naming the other tenant's draft in a form, and an
undo racing a cancel. Every refusal says what happened, keeps what the person typed, and changes
nothing."""

import pytest
from django.urls import reverse

from intents import errors, services
from intents.models import Draft, DraftNote, IntentEvent, SendIntent
from tenants.models import Membership
from tests.browser import new_draft as shop_draft
from tests.browser import sign_in
from tests.intents.helpers import run_concurrently

pytestmark = pytest.mark.django_db

REASON = "The refund amount is wrong: 40 EUR, not 400."


def _right_taken_away(membership) -> None:
    Membership.objects.filter(pk=membership.pk).update(approve_all_mailboxes=False)


def test_a_note_with_a_nul_byte_says_so_and_keeps_the_text(
    tenant_a, mailbox_a, make_draft, admin_a, signed_in
):
    """Django's CharField refused the NUL before the service was asked: the page said only
    "That note could not be read" and dropped the text."""
    draft = make_draft(mailbox_a)
    url = reverse("draft_note_add", args=[tenant_a.slug, draft.pk])
    response = signed_in(admin_a.user).post(url, {"text": "Checked\x00 with billing"})
    page = response.content.decode()
    assert response.status_code == 400
    assert "A note cannot hold NUL characters." in page
    assert "Checked\x00 with billing</textarea>" in page
    assert not DraftNote.objects.exists()


@pytest.mark.parametrize(
    "reason, said",
    [
        ("x" * 2001, "Ensure this value has at most 2000 characters (it has 2001)."),
        ("Wrong\x00amount", "Null characters are not allowed."),
    ],
)
def test_a_rejection_with_an_unusable_reason_says_what_is_wrong_with_it(
    tenant_a, mailbox_a, make_draft, admin_a, signed_in, reason, said
):
    """Any refusal of the reason was told as "Say why you reject this draft.", though one was
    given."""
    draft = make_draft(mailbox_a)
    url = reverse("draft_reject", args=[tenant_a.slug, draft.pk])
    response = signed_in(admin_a.user).post(url, {"reason": reason, "version": 1})
    page = response.content.decode()
    assert response.status_code == 400
    assert said in page and "Say why you reject this draft." not in page
    assert Draft.objects.get(pk=draft.pk).status == "pending"


def test_an_htmx_approval_after_the_right_was_taken_away_answers_the_decision_box(
    tenant_a, mailbox_a, make_draft, member_of, signed_in
):
    """A bare 403 page, which htmx does not swap in: the click seemed to do nothing."""
    ana = member_of(tenant_a, "approver")
    draft = make_draft(mailbox_a)
    version = draft.versions.get()
    client = signed_in(ana.user)
    _right_taken_away(ana)
    response = client.post(
        reverse("draft_approve", args=[tenant_a.slug, draft.pk]),
        {"version": 1, "content_hash": version.content_hash},
        headers={"HX-Request": "true"},
    )
    body = response.content.decode()
    assert response.status_code == 200
    assert body.lstrip().startswith('<section class="card decision" id="decision">')
    assert 'data-refusal="no_right"' in body
    assert "You do not have the right to decide on drafts from support.tenant-a" in body
    assert "data-approve" not in body
    assert not SendIntent.objects.exists()


@pytest.mark.browser
@pytest.mark.usefixtures("chromium_present")
def test_approving_in_the_browser_after_the_right_was_taken_away_says_why(page, shop, member_of):
    ana = member_of(shop["tenant"], "approver")
    draft = shop_draft(shop)
    sign_in(page, ana.user)
    page.goto(f"/t/{shop['tenant'].slug}/drafts/{draft.pk}/")
    _right_taken_away(ana)
    page.keyboard.press("a")
    page.wait_for_selector("#decision [data-refusal=no_right]", timeout=5_000)
    assert not SendIntent.objects.exists()
    assert Draft.objects.get(pk=draft.pk).status == "pending"


def test_a_rejection_after_the_right_was_taken_away_keeps_the_reason(
    tenant_a, mailbox_a, make_draft, member_of, signed_in
):
    ana = member_of(tenant_a, "approver")
    draft = make_draft(mailbox_a)
    client = signed_in(ana.user)
    _right_taken_away(ana)
    response = client.post(
        reverse("draft_reject", args=[tenant_a.slug, draft.pk]), {"reason": REASON, "version": 1}
    )
    body = response.content.decode()
    assert response.status_code == 403
    assert "You do not have the right to decide on drafts from support.tenant-a" in body
    assert f"{REASON}</textarea>" in body
    assert Draft.objects.get(pk=draft.pk).status == "pending"


def test_bulk_approve_naming_another_tenants_draft_approves_nothing_there(
    tenant_a, tenant_b, mailbox_b, make_draft, member_of, signed_in
):
    both = member_of(tenant_a, "approver").user
    Membership.objects.create(user=both, tenant=tenant_b, role="approver")
    theirs = make_draft(mailbox_b)
    version = theirs.versions.get()
    events = IntentEvent.objects.count()
    response = signed_in(both).post(
        reverse("bulk_approve", args=[tenant_a.slug]),
        {"item": f"{theirs.pk}:1:{version.content_hash}"},
        follow=True,
    )
    assert f"Draft {theirs.pk} was not approved: No such draft." in response.content.decode()
    assert Draft.objects.get(pk=theirs.pk).status == "pending"
    assert not SendIntent.objects.exists()
    assert IntentEvent.objects.count() == events


def test_a_bulk_approval_of_more_than_the_limit_is_refused_whole(
    tenant_a, mailbox_a, make_draft, member_of, signed_in
):
    """A hand-made post of 201 items approved the first 200 and left the last out unsaid."""
    draft = make_draft(mailbox_a)
    item = f"{draft.pk}:1:{draft.versions.get().content_hash}"
    response = signed_in(member_of(tenant_a, "approver").user).post(
        reverse("bulk_approve", args=[tenant_a.slug]), {"item": [item] * 201}, follow=True
    )
    assert "At most 200 drafts at a time; 201 were selected." in response.content.decode()
    assert Draft.objects.get(pk=draft.pk).status == "pending"
    assert not SendIntent.objects.exists()


@pytest.mark.django_db(transaction=True)
def test_undo_and_cancel_at_once_exactly_one_wins(tenant_a, mailbox_a, make_draft, member_of):
    tenant_a.send_hold_seconds = 60
    tenant_a.save(update_fields=["send_hold_seconds"])
    ana, ben = (member_of(tenant_a, "approver").user for _ in range(2))
    draft = make_draft(mailbox_a)
    version = draft.versions.get()
    intent = services.draft_approve(
        tenant=tenant_a, draft_id=draft.pk, version=1, content_hash=version.content_hash, actor=ana
    )

    def act(i):
        if i % 2:
            return services.intent_undo(tenant=tenant_a, intent_id=intent.pk, actor=ana)
        return services.intent_cancel(tenant=tenant_a, intent_id=intent.pk, actor=ben)

    results = run_concurrently(act, 10)
    assert [type(r) for r in results if isinstance(r, Exception)] == [errors.IntentError] * 9
    assert SendIntent.objects.get(pk=intent.pk).state == "cancelled"
    actions = list(IntentEvent.objects.filter(intent=intent).values_list("action", flat=True))
    assert actions.count("intent.undone") + actions.count("intent.cancelled") == 1
    draft.refresh_from_db()
    outcome = (actions.count("intent.undone"), draft.status, draft.current_version)
    assert outcome in {(1, "pending", 2), (0, "approved", 1)}
