"""The review flow through the real views and services: approve, stale approve, rights, edit,
reject, bulk approve, approve-next, warnings, filters, paging and the live notice."""

import difflib

import pytest
from django.urls import reverse
from django.utils import timezone

from intents import services
from intents.changes import MAX_MATCHED_TOKENS
from intents.models import Draft, DraftVersion, SendIntent, Suppression
from webhooks.models import InboundMessage

pytestmark = pytest.mark.django_db


def approve_data(draft):
    """The version and hash the draft page shows right now."""
    draft = Draft.objects.get(pk=draft.pk)
    version = DraftVersion.objects.get(draft=draft, number=draft.current_version)
    return {"version": version.number, "content_hash": version.content_hash}


def test_approve_creates_one_intent_for_exactly_the_shown_version(
    tenant_a, mailbox_a, make_draft, admin_a, signed_in
):
    draft = make_draft(mailbox_a)
    client = signed_in(admin_a.user)
    response = client.post(
        reverse("draft_approve", args=[tenant_a.slug, draft.pk]), approve_data(draft)
    )
    intent = SendIntent.objects.get(draft=draft)
    assert response.status_code == 302
    assert response["Location"] == reverse("outbox_intent", args=[tenant_a.slug, intent.pk])
    assert intent.draft_version.number == 1 and intent.approver == admin_a.user


def test_stale_approve_is_refused_with_the_diff(
    tenant_a, mailbox_a, make_draft, admin_a, signed_in
):
    draft = make_draft(mailbox_a, text="We refunded your order today.")
    seen = approve_data(draft)
    services.draft_add_version(
        tenant=tenant_a,
        draft_id=draft.pk,
        to=["customer@example.com", "boss@example.com"],
        cc=[],
        bcc=[],
        subject="Your refund",
        text="We refunded half of your order today.",
        html="",
        actor_user=admin_a.user,
    )
    client = signed_in(admin_a.user)
    page = client.post(reverse("draft_approve", args=[tenant_a.slug, draft.pk]), seen)
    body = page.content.decode()
    assert page.status_code == 409
    assert "Changed since you opened it" in body
    assert "We refunded<ins> half of</ins> your order today." in body
    assert "+ to: boss@example.com" in body
    assert not SendIntent.objects.filter(draft=draft).exists()


def test_stale_approve_through_htmx_gets_a_fragment_not_an_error(
    tenant_a, mailbox_a, make_draft, admin_a, signed_in
):
    draft = make_draft(mailbox_a)
    seen = approve_data(draft)
    services.draft_add_version(
        tenant=tenant_a,
        draft_id=draft.pk,
        to=["customer@example.com"],
        cc=[],
        bcc=[],
        subject="Changed subject",
        text="Other text",
        html="",
        actor_user=admin_a.user,
    )
    fragment = signed_in(admin_a.user).post(
        reverse("draft_approve", args=[tenant_a.slug, draft.pk]), seen, HTTP_HX_REQUEST="true"
    )
    body = fragment.content.decode()
    assert fragment.status_code == 200
    assert body.lstrip().startswith('<section class="card decision" id="decision">')
    assert 'data-refusal="stale_version"' in body and "<html" not in body
    assert "data-approve" not in body


def test_approver_without_right_sees_no_button_and_a_forged_post_is_403(
    tenant_a, mailbox_a, make_draft, member_of, signed_in
):
    from tests.factories import make_local_mailbox as local_mailbox

    other = local_mailbox(tenant_a, "billing")
    limited = member_of(tenant_a, "approver", approve_all_mailboxes=False)
    limited.approve_mailboxes.set([other])
    draft = make_draft(mailbox_a)
    client = signed_in(limited.user)
    page = client.get(reverse("draft", args=[tenant_a.slug, draft.pk]))
    assert page.status_code == 200
    assert b"data-approve" not in page.content and b"data-no-right" in page.content
    forged = client.post(
        reverse("draft_approve", args=[tenant_a.slug, draft.pk]), approve_data(draft)
    )
    assert forged.status_code == 403
    assert b"You do not have the right to decide on drafts from support.tenant-a" in forged.content
    assert not SendIntent.objects.filter(draft=draft).exists()


def test_viewer_reads_but_cannot_decide(tenant_a, mailbox_a, make_draft, member_of, signed_in):
    viewer = member_of(tenant_a, "viewer")
    draft = make_draft(mailbox_a)
    client = signed_in(viewer.user)
    page = client.get(reverse("draft", args=[tenant_a.slug, draft.pk]))
    assert b"data-approve" not in page.content and b"viewers do not approve" in page.content
    assert (
        client.post(
            reverse("draft_reject", args=[tenant_a.slug, draft.pk]), {"reason": "no"}
        ).status_code
        == 403
    )
    assert Draft.objects.get(pk=draft.pk).status == "pending"


def test_edit_creates_a_version_by_the_person_which_then_needs_approval(
    tenant_a, mailbox_a, make_draft, admin_a, signed_in
):
    draft = make_draft(mailbox_a)
    client = signed_in(admin_a.user)
    form = client.get(reverse("draft_edit", args=[tenant_a.slug, draft.pk]))
    assert form.status_code == 200
    saved = client.post(
        reverse("draft_edit", args=[tenant_a.slug, draft.pk]),
        {
            "base_version": 1,
            "to": "customer@example.com, cc-me@example.com",
            "cc": "",
            "bcc": "",
            "subject": "Your refund",
            "text": "Edited by a person.",
            "html": "",
        },
    )
    assert saved.status_code == 302
    version = DraftVersion.objects.get(draft=draft, number=2)
    assert version.author_kind == "person" and version.author_user == admin_a.user
    assert version.to == ["customer@example.com", "cc-me@example.com"]
    page = client.get(reverse("draft", args=[tenant_a.slug, draft.pk]))
    assert b"<ins>Edited" in page.content or b"<ins>Edited by a person.</ins>" in page.content
    client.post(reverse("draft_approve", args=[tenant_a.slug, draft.pk]), approve_data(draft))
    assert SendIntent.objects.get(draft=draft).draft_version == version


def test_edit_from_a_stale_base_is_refused(tenant_a, mailbox_a, make_draft, admin_a, signed_in):
    draft = make_draft(mailbox_a)
    services.draft_add_version(
        tenant=tenant_a,
        draft_id=draft.pk,
        to=["x@example.com"],
        cc=[],
        bcc=[],
        subject="S",
        text="T",
        html="",
        actor_user=admin_a.user,
    )
    response = signed_in(admin_a.user).post(
        reverse("draft_edit", args=[tenant_a.slug, draft.pk]),
        {"base_version": 1, "to": "y@example.com", "subject": "S", "text": "mine"},
    )
    assert response.status_code == 409
    assert b"Someone saved version 2" in response.content
    assert DraftVersion.objects.filter(draft=draft).count() == 2


def test_edit_with_a_bad_address_names_it_and_saves_nothing(
    tenant_a, mailbox_a, make_draft, admin_a, signed_in
):
    draft = make_draft(mailbox_a)
    response = signed_in(admin_a.user).post(
        reverse("draft_edit", args=[tenant_a.slug, draft.pk]),
        {"base_version": 1, "to": "not-an-address", "subject": "S", "text": "T"},
    )
    assert response.status_code == 400
    assert b"not-an-address" in response.content
    assert DraftVersion.objects.filter(draft=draft).count() == 1


def test_reject_needs_a_reason_and_then_records_it(
    tenant_a, mailbox_a, make_draft, admin_a, signed_in
):
    draft = make_draft(mailbox_a)
    client = signed_in(admin_a.user)
    empty = client.post(reverse("draft_reject", args=[tenant_a.slug, draft.pk]), {"reason": ""})
    assert empty.status_code == 400 and b"Say why you reject" in empty.content
    unsaid = client.post(
        reverse("draft_reject", args=[tenant_a.slug, draft.pk]), {"reason": "Wrong amount"}
    )
    assert unsaid.status_code == 400 and b"which version it is for" in unsaid.content
    assert Draft.objects.get(pk=draft.pk).status == "pending"
    client.post(
        reverse("draft_reject", args=[tenant_a.slug, draft.pk]),
        {"reason": "Wrong amount", "version": 1},
    )
    draft.refresh_from_db()
    assert (draft.status, draft.reject_reason) == ("rejected", "Wrong amount")


def test_a_rejection_from_a_page_older_than_the_current_version_is_refused_with_the_diff(
    tenant_a, mailbox_a, make_draft, admin_a, signed_in
):
    draft = make_draft(mailbox_a, text="We refunded your order today.")
    seen = approve_data(draft)["version"]
    services.draft_add_version(
        tenant=tenant_a,
        draft_id=draft.pk,
        to=["customer@example.com"],
        cc=[],
        bcc=[],
        subject="Your refund",
        text="We refunded half of your order today.",
        html="",
        actor_user=admin_a.user,
    )
    client = signed_in(admin_a.user)
    page = client.post(
        reverse("draft_reject", args=[tenant_a.slug, draft.pk]),
        {"reason": "Wrong amount", "version": seen},
    )
    body = page.content.decode()
    assert page.status_code == 409
    assert "Changed since you opened it" in body
    assert "We refunded<ins> half of</ins> your order today." in body
    assert ">Wrong amount</textarea>" in body
    draft.refresh_from_db()
    assert draft.status == "pending"


def test_approve_next_opens_the_next_pending_draft(
    tenant_a, mailbox_a, make_draft, admin_a, signed_in
):
    first, second = make_draft(mailbox_a), make_draft(mailbox_a)
    response = signed_in(admin_a.user).post(
        reverse("draft_approve", args=[tenant_a.slug, first.pk]),
        {**approve_data(first), "next": "1"},
    )
    assert response["Location"] == reverse("draft", args=[tenant_a.slug, second.pk])


def test_bulk_approve_checks_each_draft_against_its_own_hash(
    tenant_a, mailbox_a, make_draft, admin_a, signed_in
):
    keep, changed = make_draft(mailbox_a), make_draft(mailbox_a)
    items = [
        f"{d.pk}:{approve_data(d)['version']}:{approve_data(d)['content_hash']}"
        for d in (keep, changed)
    ]
    services.draft_add_version(
        tenant=tenant_a,
        draft_id=changed.pk,
        to=["z@example.com"],
        cc=[],
        bcc=[],
        subject="New",
        text="New",
        html="",
        actor_user=admin_a.user,
    )
    response = signed_in(admin_a.user).post(
        reverse("bulk_approve", args=[tenant_a.slug]), {"item": items}, follow=True
    )
    body = response.content.decode()
    assert SendIntent.objects.filter(draft=keep).exists()
    assert not SendIntent.objects.filter(draft=changed).exists()
    assert "Approved 1 draft" in body and f"Draft {changed.pk} was not approved" in body


def test_bulk_approve_refuses_malformed_items(tenant_a, admin_a, signed_in):
    response = signed_in(admin_a.user).post(
        reverse("bulk_approve", args=[tenant_a.slug]), {"item": ["1:1:nothex"]}, follow=True
    )
    assert b"was not understood" in response.content
    assert not SendIntent.objects.exists()


def test_recipient_warnings_on_the_draft_and_the_queue_filter(
    tenant_a, mailbox_a, make_draft, admin_a, signed_in
):
    clean = make_draft(mailbox_a, to=["fine@example.com"], subject="Clean one")
    InboundMessage.objects.create(
        tenant=tenant_a,
        mailbox=mailbox_a,
        thread_id="thr-1",
        message_id="<m1@x>",
        sender="Later Bounced <later-bounced@example.com>",
        subject="Risky one",
        received_at=timezone.now(),
    )
    risky = make_draft(
        mailbox_a,
        to=["later-bounced@example.com"],
        cc=["stranger@other.test"],
        subject=None,
        in_reply_to="<m1@x>",
    )
    Suppression.objects.create(
        tenant=tenant_a, address="later-bounced@example.com", reason="bounced"
    )
    tenant_a.own_domains = ["example.com"]
    tenant_a.save(update_fields=["own_domains"])
    client = signed_in(admin_a.user)
    page = client.get(reverse("draft", args=[tenant_a.slug, risky.pk])).content.decode()
    assert 'data-warning="suppressed"' in page
    assert 'data-warning="not_on_thread"' in page and "stranger@other.test" in page
    assert 'data-note="external"' in page
    filtered = client.get(
        reverse("tenant_home", args=[tenant_a.slug]), {"warnings": "on"}
    ).content.decode()
    assert "Risky one" in filtered and "Clean one" not in filtered
    assert clean.pk != risky.pk


def test_a_sub_address_of_a_suppressed_address_is_flagged_named_and_refused(
    tenant_a, mailbox_a, make_draft, admin_a, signed_in
):
    """ana+billing@ reaches ana@'s mailbox, whose complaint covers it: the page says as which
    entry, the queue flags the draft, and approving it is refused. ben+news@'s bounce covers
    only itself."""
    make_draft(mailbox_a, to=["ben@example.com"], subject="Clean one")
    risky = make_draft(
        mailbox_a, to=["ana+billing@example.com"], cc=["ben+other@example.com"], subject="Risky one"
    )
    Suppression.objects.create(tenant=tenant_a, address="ana@example.com", reason="complained")
    Suppression.objects.create(tenant=tenant_a, address="ben+news@example.com", reason="bounced")
    client = signed_in(admin_a.user)

    page = client.get(reverse("draft", args=[tenant_a.slug, risky.pk])).content.decode()
    filtered = client.get(
        reverse("tenant_home", args=[tenant_a.slug]), {"warnings": "on"}
    ).content.decode()
    refused = client.post(
        reverse("draft_approve", args=[tenant_a.slug, risky.pk]), approve_data(risky)
    ).content.decode()

    assert page.count('data-warning="suppressed"') == 1
    assert "Suppressed as ana@example.com: complained" in page
    assert "Risky one" in filtered and "Clean one" not in filtered
    assert (
        "ana+billing@example.com is on this tenant&#x27;s suppression list as ana@example.com "
        "(complained)" in refused
    )
    assert not SendIntent.objects.filter(draft=risky).exists()


def _check_box(page: str) -> str:
    return page.split('<p class="warn-box small" data-recipients-to-check>')[1].split("</p>")[0]


def test_a_recipient_only_to_check_is_not_said_to_be_refused(
    tenant_a, mailbox_a, make_draft, admin_a, signed_in
):
    """A stranger to the thread is counted among the recipients to check, but approving from the
    page is not refused for it (only a list's approval is). The box beside the Approve button
    said only that suppressed, out-of-policy and own addresses are refused: nothing said what
    the one counted was, nor that it was only to check."""
    asked = _thread_from(tenant_a, mailbox_a, "t-only", "Ana <ana@customer.test>")
    draft = make_draft(
        mailbox_a,
        to=["ana@customer.test"],
        cc=["ben@elsewhere.test"],
        subject=None,
        in_reply_to=asked,
    )
    client = signed_in(admin_a.user)

    page = client.get(reverse("draft", args=[tenant_a.slug, draft.pk])).content.decode()

    box = _check_box(page)
    assert "1 recipient to check first." in box
    assert "are refused" not in box
    assert (
        "Not a participant of this thread, or not plain ASCII: only to check, not refused." in box
    )
    assert 'class="badge warn" data-warning="not_on_thread"' in page


def test_refused_and_only_to_check_recipients_are_told_apart(
    tenant_a, mailbox_a, make_draft, admin_a, signed_in
):
    asked = _thread_from(tenant_a, mailbox_a, "t-both", "Ana <ana@customer.test>")
    draft = make_draft(
        mailbox_a,
        to=["ana@customer.test"],
        cc=["ben@elsewhere.test"],
        subject=None,
        in_reply_to=asked,
    )
    Suppression.objects.create(tenant=tenant_a, address="ana@customer.test", reason="bounced")
    client = signed_in(admin_a.user)

    page = client.get(reverse("draft", args=[tenant_a.slug, draft.pk])).content.decode()

    box = _check_box(page)
    assert "2 recipients to check first." in box
    assert (
        "Suppressed, invalid or out-of-policy addresses, and the mailbox's own, are refused."
        in (box)
    )
    assert (
        "Not a participant of this thread, or not plain ASCII: only to check, not refused." in box
    )
    assert 'class="badge bad" data-warning="suppressed"' in page
    assert 'class="badge warn" data-warning="not_on_thread"' in page


def _thread_from(tenant, mailbox, thread_id, sender) -> str:
    """The message id of a customer's message from ``sender`` opening ``thread_id``."""
    return InboundMessage.objects.create(
        tenant=tenant,
        mailbox=mailbox,
        thread_id=thread_id,
        message_id=f"<{thread_id}@customer.test>",
        sender=sender,
        subject="Help",
        received_at=timezone.now(),
    ).message_id


def test_a_sender_parseaddr_cannot_read_still_leaves_a_stranger_flagged(
    tenant_a, mailbox_a, make_draft, admin_a, signed_in
):
    """A customer whose From no parser reads as one address ("Doe, John <...>" unquoted) made the
    draft page call nobody a stranger: a recipient the customer talked the agent into adding
    went without "Not a participant", while the queue flagged the draft."""
    asked = _thread_from(tenant_a, mailbox_a, "t-doe", "Doe, John <John@Customer.test>")
    draft = make_draft(
        mailbox_a,
        to=["john@customer.test"],
        cc=["accomplice@elsewhere.test"],
        subject=None,
        in_reply_to=asked,
    )
    client = signed_in(admin_a.user)

    page = client.get(reverse("draft", args=[tenant_a.slug, draft.pk])).content.decode()
    queue = client.get(reverse("tenant_home", args=[tenant_a.slug]), {"warnings": "on"})

    rows = page.split('<ul class="recipients">')[1].split("</ul>")[0].split("<li")[1:]
    john, accomplice = rows
    assert 'data-warning="not_on_thread"' not in john
    assert 'data-warning="not_on_thread"' in accomplice
    assert [row.pk for row in queue.context["page"].rows] == [draft.pk]


@pytest.mark.parametrize("recipient", ["j_doe@customer.test", "j%@customer.test"])
def test_an_underscore_or_percent_in_a_recipient_matches_no_other_sender_in_the_queue(
    tenant_a, mailbox_a, make_draft, admin_a, signed_in, recipient
):
    """The queue's flag compared with LIKE, so j_doe@ passed for the thread's j.doe@ (another
    person's mailbox) and bulk approval showed nothing to check; the draft page flagged it."""
    asked = _thread_from(tenant_a, mailbox_a, "t-jdoe", "J <j.doe@customer.test>")
    draft = make_draft(mailbox_a, to=[recipient], subject=None, in_reply_to=asked)
    client = signed_in(admin_a.user)

    queue = client.get(reverse("tenant_home", args=[tenant_a.slug]), {"warnings": "on"})
    page = client.get(reverse("draft", args=[tenant_a.slug, draft.pk])).content.decode()

    assert [row.pk for row in queue.context["page"].rows] == [draft.pk]
    assert 'data-warning="not_on_thread"' in page


def test_policy_warning_shows_and_filters(tenant_a, make_draft, admin_a, signed_in):
    from tests.factories import make_local_mailbox as local_mailbox

    restricted = local_mailbox(
        tenant_a, "restricted", policy_mode="restricted", allowed_domains=["example.com"]
    )
    draft = make_draft(restricted, to=["ok@example.com"], subject="Allowed then narrowed")
    restricted.allowed_domains = ["example.org"]
    restricted.save(update_fields=["allowed_domains"])
    client = signed_in(admin_a.user)
    page = client.get(reverse("draft", args=[tenant_a.slug, draft.pk])).content.decode()
    assert 'data-warning="not_allowed"' in page
    queue = client.get(
        reverse("tenant_home", args=[tenant_a.slug]), {"warnings": "on"}
    ).content.decode()
    assert "Allowed then narrowed" in queue


def test_search_and_mailbox_filter(tenant_a, mailbox_a, make_draft, admin_a, signed_in):
    from tests.factories import make_local_mailbox as local_mailbox

    other = local_mailbox(tenant_a, "sales")
    make_draft(mailbox_a, subject="Invoice question", to=["ann@example.com"])
    make_draft(other, subject="Pricing", to=["bob@shop.example"])
    client = signed_in(admin_a.user)
    home = reverse("tenant_home", args=[tenant_a.slug])
    by_recipient = client.get(home, {"q": "shop.exam"}).content.decode()
    assert "Pricing" in by_recipient and "Invoice question" not in by_recipient
    by_subject = client.get(home, {"q": "invoice"}).content.decode()
    assert "Invoice question" in by_subject and "Pricing" not in by_subject
    by_mailbox = client.get(home, {"mailbox": other.pk}).content.decode()
    assert "Pricing" in by_mailbox and "Invoice question" not in by_mailbox


def test_cursor_pagination_walks_the_queue_without_gaps(
    tenant_a, mailbox_a, make_draft, admin_a, signed_in
):
    drafts = [make_draft(mailbox_a, subject=f"Row {i:03d}") for i in range(55)]
    client = signed_in(admin_a.user)
    home = reverse("tenant_home", args=[tenant_a.slug])
    first = client.get(home)
    page1 = first.context["page"]
    second = client.get(home, {"after": page1.next_cursor})
    page2 = second.context["page"]
    seen = [d.pk for d in page1.rows] + [d.pk for d in page2.rows]
    assert seen == [d.pk for d in drafts]
    assert page2.next_cursor is None


def test_live_notice_counts_new_and_decided_drafts(
    tenant_a, mailbox_a, make_draft, admin_a, signed_in
):
    shown = make_draft(mailbox_a)
    client = signed_in(admin_a.user)
    since = client.get(reverse("tenant_home", args=[tenant_a.slug])).context["since_id"]
    quiet = client.get(
        reverse("queue_changes", args=[tenant_a.slug]), {"since": since, "shown": shown.pk}
    )
    assert b"notice" not in quiet.content
    make_draft(mailbox_a)
    services.draft_reject(tenant=tenant_a, draft_id=shown.pk, reason="dup", actor=admin_a.user)
    notice = client.get(
        reverse("queue_changes", args=[tenant_a.slug]),
        {"since": since, "shown": shown.pk},
        HTTP_HX_REQUEST="true",
    ).content.decode()
    assert "1 new draft arrived" in notice and "1 draft below was decided by someone else" in notice
    assert "<html" not in notice


def test_customer_wrote_again_is_flagged(tenant_a, mailbox_a, make_draft, admin_a, signed_in):
    from datetime import timedelta

    def customer_wrote(n, received_at):
        InboundMessage.objects.create(
            tenant=tenant_a,
            mailbox=mailbox_a,
            thread_id="thr-9",
            message_id=f"<q{n}@x>",
            sender="c@example.com",
            subject=f"Message {n}",
            received_at=received_at,
        )

    # The draft answers the first message, so that one exists first (a reply must answer a
    # message its mailbox received); the second arrives while the draft waits for review.
    customer_wrote(1, timezone.now() - timedelta(minutes=30))
    draft = make_draft(
        mailbox_a, thread_id="thr-9", in_reply_to="<q1@x>", to=["c@example.com"], subject=None
    )
    customer_wrote(2, draft.created_at + timedelta(minutes=5))
    page = (
        signed_in(admin_a.user)
        .get(reverse("draft", args=[tenant_a.slug, draft.pk]))
        .content.decode()
    )
    assert "The customer wrote again" in page and "Message 2" in page


def test_queue_count_stops_at_the_cap(
    tenant_a, mailbox_a, make_draft, admin_a, signed_in, monkeypatch
):
    from review import queries as review

    monkeypatch.setattr(review, "TOTAL_CAP", 3)
    for _ in range(5):
        make_draft(mailbox_a)
    page = signed_in(admin_a.user).get(reverse("tenant_home", args=[tenant_a.slug]))
    assert 'title="Pending drafts matching the filters">3+</span>' in page.content.decode()


def test_a_draft_naming_another_mailboxs_thread_does_not_show_that_conversation(
    tenant_a, mailbox_a, make_draft, member_of, signed_in
):
    """A draft row naming a thread of another mailbox (no service writes one: the answered
    message must be this mailbox's) must not show an approver of this one that mailbox's
    customers."""
    from tests.factories import make_local_mailbox as local_mailbox

    other = local_mailbox(tenant_a, "billing")
    InboundMessage.objects.create(
        tenant=tenant_a,
        mailbox=other,
        thread_id="thr-billing",
        message_id="<private@x>",
        sender="Grace Hopper <grace@customer.test>",
        subject="My card was charged twice",
        received_at=timezone.now(),
    )
    draft = make_draft(mailbox_a, subject="Hello")
    # As if it answered that thread: the rows the constraint admits (draft_thread_only_for_replies).
    Draft.objects.filter(pk=draft.pk).update(thread_id="thr-billing", in_reply_to="<private@x>")
    approver = member_of(tenant_a, "approver")
    approver.approve_all_mailboxes = False
    approver.save(update_fields=["approve_all_mailboxes"])
    approver.approve_mailboxes.set([mailbox_a])

    page = signed_in(approver.user).get(reverse("draft", args=[tenant_a.slug, draft.pk]))

    assert page.status_code == 200
    assert "grace@customer.test" not in page.content.decode()
    assert "charged twice" not in page.content.decode()


def test_bulk_approve_leaves_a_draft_whose_earlier_send_may_have_gone_out_to_its_page(
    tenant_a, mailbox_a, make_draft, admin_a, member_of, signed_in
):
    """Only the draft page warns that AgentMail may already have delivered the earlier send; a
    queue row does not, and a new send could reach the customer twice."""
    from tests.intents.helpers import unproven

    draft, plain = make_draft(mailbox_a), make_draft(mailbox_a)
    approver = member_of(tenant_a, "approver").user
    first = services.draft_approve(
        tenant=tenant_a, draft_id=draft.pk, actor=approver, **approve_data(draft)
    )
    unproven(first)
    services.draft_reopen(tenant=tenant_a, draft_id=draft.pk, actor=approver, reason="retry")
    items = [
        f"{d.pk}:{approve_data(d)['version']}:{approve_data(d)['content_hash']}"
        for d in (draft, plain)
    ]
    client = signed_in(admin_a.user)

    response = client.post(
        reverse("bulk_approve", args=[tenant_a.slug]), {"item": items}, follow=True
    )

    body = response.content.decode()
    assert "Approved 1 draft" in body and "may have gone out: open the draft" in body
    assert SendIntent.objects.filter(draft=draft).count() == 1
    assert SendIntent.objects.filter(draft=plain).count() == 1
    page = client.post(
        reverse("draft_approve", args=[tenant_a.slug, draft.pk]), approve_data(draft)
    )
    assert page.status_code == 302
    assert SendIntent.objects.filter(draft=draft).count() == 2


def test_cancelling_with_an_over_long_reason_is_refused_and_cancels_nothing(
    tenant_a, mailbox_a, make_draft, admin_a, signed_in
):
    """The reason was dropped and the send cancelled anyway; now the form says why it refused."""
    draft = make_draft(mailbox_a)
    intent = services.draft_approve(
        tenant=tenant_a, draft_id=draft.pk, actor=admin_a.user, **approve_data(draft)
    )
    client = signed_in(admin_a.user)

    response = client.post(
        reverse("intent_cancel", args=[tenant_a.slug, intent.pk]),
        {"reason": "x" * 2001},
        follow=True,
    )

    intent.refresh_from_db()
    assert intent.state == SendIntent.State.QUEUED
    assert "at most 2000 characters" in response.content.decode()
    kept = client.post(
        reverse("intent_cancel", args=[tenant_a.slug, intent.pk]), {"reason": "Wrong customer"}
    )
    intent.refresh_from_db()
    assert kept.status_code == 302 and intent.state == SendIntent.State.CANCELLED


class _SmallSidesOnly(difflib.SequenceMatcher):
    """SequenceMatcher that refuses, at once, a side longer than the bound: its work grows with
    the product of the sides (a 100,000-character body took 47 s, past gunicorn's 30 s)."""

    def __init__(self, isjunk=None, a="", b="", autojunk=True):
        assert len(a) <= MAX_MATCHED_TOKENS and len(b) <= MAX_MATCHED_TOKENS, (len(a), len(b))
        super().__init__(isjunk, a, b, autojunk)


def test_the_diff_of_a_long_quoted_body_opens_and_names_the_changed_word(
    tenant_a, mailbox_a, make_draft, admin_a, signed_in, monkeypatch
):
    """A customer's long mail, quoted back in the reply, made the draft page of any revised
    draft compute a diff quadratic in the body's length: the worker was killed, the page never
    opened, and every reviewer who tried held one of the few web workers for 30 s."""
    monkeypatch.setattr(difflib, "SequenceMatcher", _SmallSidesOnly)
    quoted = " ".join(
        ("refund", "order", "the", "your", "parcel", "we")[i % 6] for i in range(20_000)
    )
    draft = make_draft(mailbox_a, text="Dear Ann,\n\n" + quoted)
    services.draft_add_version(
        tenant=tenant_a,
        draft_id=draft.pk,
        to=draft.versions.get().to,
        cc=[],
        bcc=[],
        subject=draft.versions.get().subject,
        text="Dear Anna,\n\n" + quoted,
        html="",
        actor_user=admin_a.user,
    )

    page = signed_in(admin_a.user).get(reverse("draft", args=[tenant_a.slug, draft.pk]))

    diff = page.content.decode().split('id="diff"')[1].split("</section>")[0]
    assert "Dear <del>Ann,</del><ins>Anna,</ins>" in diff


def _written_before_the_own_address_rule(draft, field: str):
    """The draft's current version with its own mailbox's address added to ``field``, its hash
    recomputed: a draft written before such a recipient was refused (creation refuses it now)."""
    from intents.hashing import version_hash

    version = DraftVersion.objects.select_related("draft").get(
        draft=draft, number=draft.current_version
    )
    setattr(version, field, [*getattr(version, field), draft.mailbox.address])
    version.content_hash = version_hash(version)
    version.save(update_fields=[field, "content_hash"])
    return version


def test_a_recipient_that_is_the_sending_mailbox_is_flagged_and_refused_at_approval(
    tenant_a, mailbox_a, make_draft, admin_a, signed_in
):
    """A reply to its own inbox comes back into it (AgentMail delivers it there), where the
    agent may answer it again: a mail loop. The page flags the address like the other recipient
    warnings, the queue's warning filter lists the draft, and the approval is refused naming it."""
    draft = make_draft(mailbox_a, subject="Copy to ourselves")
    _written_before_the_own_address_rule(draft, "cc")
    client = signed_in(admin_a.user)

    page = client.get(reverse("draft", args=[tenant_a.slug, draft.pk])).content.decode()
    queue = client.get(reverse("tenant_home", args=[tenant_a.slug]), {"warnings": "on"})
    approve = client.post(
        reverse("draft_approve", args=[tenant_a.slug, draft.pk]), approve_data(draft)
    )

    assert 'data-warning="own_mailbox"' in page
    assert "This mailbox itself: the reply would come back into its inbox" in page
    assert [row.pk for row in queue.context["page"].rows] == [draft.pk]
    assert "back into its own inbox" in approve.content.decode()
    assert not SendIntent.objects.filter(draft=draft).exists()
    assert Draft.objects.get(pk=draft.pk).status == "pending"
