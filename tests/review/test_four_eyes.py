"""Four-eyes on edit: the person who wrote the current version is told up front that someone else
must approve it, on the draft page and in the queue's bulk approve, instead of a dead end."""

import re

import pytest
from django.urls import reverse

from intents.models import SendIntent

pytestmark = pytest.mark.django_db

REASON = "You edited this version; this tenant requires another person to approve it."


@pytest.fixture
def four_eyes(tenant_a):
    tenant_a.second_approver_on_edit = True
    tenant_a.save(update_fields=["second_approver_on_edit"])
    return tenant_a


def buttons(html: str, marker: str) -> list[str]:
    return re.findall(rf"<button(?=[^>]*\s{marker}[\s>])[^>]*>", html)


def test_the_editor_sees_approve_disabled_with_the_reason(
    four_eyes, mailbox_a, make_draft, admin_a, member_of, signed_in, client
):
    draft = make_draft(mailbox_a, actor_user=admin_a.user)
    url = reverse("draft", args=[four_eyes.slug, draft.pk])

    editor_page = signed_in(admin_a.user).get(url).content.decode()
    client.logout()
    other_page = signed_in(member_of(four_eyes, "approver").user).get(url).content.decode()

    editor_buttons = buttons(editor_page, "data-approve") + buttons(
        editor_page, "data-approve-next"
    )
    assert len(editor_buttons) == 2
    assert all(
        " disabled" in b and 'aria-describedby="approve-blocked"' in b for b in editor_buttons
    )
    assert re.search(r'<p[^>]*id="approve-blocked"[^>]*>[^<]*' + re.escape(REASON), editor_page)
    assert [" disabled" in b for b in buttons(other_page, "data-approve")] == [False]
    assert REASON not in other_page


def test_without_the_policy_the_author_may_approve_as_before(
    tenant_a, mailbox_a, make_draft, admin_a, signed_in
):
    draft = make_draft(mailbox_a, actor_user=admin_a.user)

    page = signed_in(admin_a.user).get(reverse("draft", args=[tenant_a.slug, draft.pk]))

    html = page.content.decode()
    assert [" disabled" in b for b in buttons(html, "data-approve")] == [False]
    assert REASON not in html


def test_the_queue_does_not_offer_the_editors_own_drafts_for_bulk_approve(
    four_eyes, mailbox_a, make_draft, admin_a, member_of, signed_in
):
    colleague = member_of(four_eyes, "approver").user
    own = make_draft(mailbox_a, actor_user=admin_a.user)
    theirs = make_draft(mailbox_a, actor_user=colleague)

    html = signed_in(admin_a.user).get(reverse("tenant_home", args=[four_eyes.slug])).content
    html = html.decode()

    boxes = re.findall(r'<input type="checkbox" name="item" value="(\d+):', html)
    own_row = re.search(
        rf"<article[^>]*data-row>(?:(?!</article>).)*?drafts/{own.pk}/(?:(?!</article>).)*</article>",
        html,
        re.S,
    ).group(0)
    assert boxes == [str(theirs.pk)]
    assert "another person must approve it" in own_row


def test_a_bulk_approve_that_names_the_editors_draft_is_refused_with_the_reason(
    four_eyes, mailbox_a, make_draft, admin_a, member_of, signed_in
):
    colleague = member_of(four_eyes, "approver").user
    own = make_draft(mailbox_a, actor_user=admin_a.user)
    theirs = make_draft(mailbox_a, actor_user=colleague)
    items = [f"{d.pk}:{d.current_version}:{d.versions.get().content_hash}" for d in (own, theirs)]

    response = signed_in(admin_a.user).post(
        reverse("bulk_approve", args=[four_eyes.slug]), {"item": items}, follow=True
    )

    body = response.content.decode()
    assert f"Draft {own.pk} was not approved: {REASON}" in body
    assert "Approved 1 draft;" in body
    assert list(SendIntent.objects.values_list("draft_id", flat=True)) == [theirs.pk]


def _revise(tenant, draft, text, **author):
    from intents import services

    current = draft.versions.get(number=draft.current_version)
    services.draft_add_version(
        tenant=tenant,
        draft_id=draft.pk,
        to=list(current.to),
        cc=[],
        bcc=[],
        subject=current.subject,
        text=text,
        html="",
        **author,
    )
    draft.refresh_from_db()


def _approve(tenant, draft, actor):
    from intents import services

    version = draft.versions.get(number=draft.current_version)
    return services.draft_approve(
        tenant=tenant,
        draft_id=draft.pk,
        version=version.number,
        content_hash=version.content_hash,
        actor=actor,
    )


def test_an_editor_cannot_approve_their_edit_once_a_colleague_adds_a_version_on_top(
    four_eyes, mailbox_a, make_draft, member_of
):
    """Found by an outside probe: the rule looked only at who wrote the current version, so a
    colleague's trailing full stop let the editor approve their own refund offer alone."""
    from intents import errors

    alice, bob, carol = (member_of(four_eyes, "approver").user for _ in range(3))
    draft = make_draft(mailbox_a)
    _revise(four_eyes, draft, "Full refund plus 100 EUR", actor_user=alice)
    _revise(four_eyes, draft, "Full refund plus 100 EUR.", actor_user=bob)

    with pytest.raises(errors.SecondApproverRequired):
        _approve(four_eyes, draft, alice)
    with pytest.raises(errors.SecondApproverRequired):
        _approve(four_eyes, draft, bob)  # the current version's author, as before
    assert _approve(four_eyes, draft, carol).state == SendIntent.State.QUEUED


def test_a_reopened_send_keeps_its_editor_from_approving_it_and_lets_the_reopener(
    four_eyes, mailbox_a, make_draft, member_of
):
    """The copy a reopen makes was authored by the person reopening: the editor of the approved
    text could then approve it alone, and the person who only reopened could not."""
    from intents import errors, services
    from tests.intents.helpers import set_state

    alice, bob = (member_of(four_eyes, "approver").user for _ in range(2))
    draft = make_draft(mailbox_a)
    _revise(four_eyes, draft, "Full refund plus 100 EUR", actor_user=alice)
    intent = _approve(four_eyes, draft, bob)
    set_state(intent, "failed")
    services.draft_reopen(tenant=four_eyes, draft_id=draft.pk, actor=bob, reason="try again")
    draft.refresh_from_db()

    with pytest.raises(errors.SecondApproverRequired):
        _approve(four_eyes, draft, alice)
    assert _approve(four_eyes, draft, bob).state == SendIntent.State.QUEUED


def test_an_approval_the_rule_refuses_shows_the_page_with_the_reason_not_a_bare_403(
    four_eyes, mailbox_a, make_draft, member_of, signed_in
):
    """Found by the concurrent-reviewers probe: Bob's page offered Approve, then Alice's version
    landed on top of Bob's edit; the click got Django's bare 403 page. It is the draft page
    again, with why and what to do."""
    alice, bob = (member_of(four_eyes, "approver").user for _ in range(2))
    draft = make_draft(mailbox_a)
    _revise(four_eyes, draft, "Full refund plus 100 EUR", actor_user=bob)
    _revise(four_eyes, draft, "Full refund plus 100 EUR.", actor_user=alice)
    version = draft.versions.get(number=draft.current_version)

    refused = signed_in(bob).post(
        reverse("draft_approve", args=[four_eyes.slug, draft.pk]),
        {"version": version.number, "content_hash": version.content_hash, "messages_seen": ""},
    )

    assert refused.status_code == 403
    assert refused.templates[0].name == "review/draft.html"
    assert "another person" in refused.content.decode()
    assert not SendIntent.objects.filter(draft=draft).exists()


EARLIER = (
    "You wrote a version of this draft since it was last approved; this tenant requires another "
    "person to approve it."
)


def test_the_writer_of_an_earlier_version_is_told_too_not_refused_after_the_click(
    four_eyes, mailbox_a, make_draft, admin_a, signed_in
):
    """An agent's revision after the person's edit made the agent the current author: the page
    offered Approve, and the click was refused for the person's earlier version."""
    from intents import services
    from tests.intents.test_drafts import make_token

    draft = make_draft(mailbox_a, actor_user=admin_a.user)
    services.draft_add_version(
        tenant=four_eyes,
        draft_id=draft.pk,
        to=["customer@example.com"],
        cc=[],
        bcc=[],
        subject="Your refund",
        text="Hello again.",
        html="",
        agent_token=make_token(four_eyes),
    )

    page = signed_in(admin_a.user).get(reverse("draft", args=[four_eyes.slug, draft.pk]))

    html = page.content.decode()
    assert all(" disabled" in b for b in buttons(html, "data-approve"))
    assert re.search(r'<p[^>]*id="approve-blocked"[^>]*>[^<]*' + re.escape(EARLIER), html)


# --- the queue and an earlier version --------------------------------------------------------------

EARLIER_BADGE = "You edited an earlier version: another person must approve it"


def queue_html(client, tenant) -> str:
    return client.get(reverse("tenant_home", args=[tenant.slug])).content.decode()


def checkboxes(html: str) -> list[int]:
    return [int(pk) for pk in re.findall(r'<input type="checkbox" name="item" value="(\d+):', html)]


def queue_row(html: str, draft) -> str:
    return re.search(
        rf"<article[^>]*data-row>(?:(?!</article>).)*?drafts/{draft.pk}/(?:(?!</article>).)*</article>",
        html,
        re.S,
    ).group(0)


def edited_then_revised_by_the_agent(tenant, make_draft, mailbox, editor, token):
    """An agent's draft, edited by ``editor`` (version 2), then revised by the agent (version 3):
    the agent wrote the current version, the editor one before it."""
    draft = make_draft(mailbox, agent_token=token)
    _revise(tenant, draft, "Full refund plus 100 EUR", actor_user=editor)
    _revise(tenant, draft, "Full refund plus 100 EUR, as agreed.", agent_token=token)
    return draft


def test_the_queue_does_not_offer_a_draft_whose_earlier_version_the_reviewer_edited(
    four_eyes, mailbox_a, make_draft, member_of, signed_in
):
    """The queue looked only at the current version's author: the editor got a checkbox for
    the agent's version on top of their edit, and bulk approve then refused it."""
    from tests.intents.test_drafts import make_token

    alice, bob = (member_of(four_eyes, "approver").user for _ in range(2))
    token = make_token(four_eyes)
    edited = edited_then_revised_by_the_agent(four_eyes, make_draft, mailbox_a, alice, token)
    untouched = make_draft(mailbox_a, agent_token=token)

    alices = queue_html(signed_in(alice), four_eyes)
    bobs = queue_html(signed_in(bob), four_eyes)

    assert edited.current_version == 3
    assert checkboxes(alices) == [untouched.pk]
    assert 'data-approve-blocked="earlier-version"' in queue_row(alices, edited)
    assert EARLIER_BADGE in queue_row(alices, edited)
    assert "You edited it:" not in queue_row(alices, edited)
    assert checkboxes(bobs) == [edited.pk, untouched.pk]
    assert "data-approve-blocked" not in bobs


def test_the_current_versions_editor_keeps_the_current_versions_badge(
    four_eyes, mailbox_a, make_draft, member_of, signed_in
):
    """Both rules hold for the author of the current version: the row names the one that
    applies to what they see, their own version."""
    from tests.intents.test_drafts import make_token

    alice = member_of(four_eyes, "approver").user
    draft = make_draft(mailbox_a, agent_token=make_token(four_eyes))
    _revise(four_eyes, draft, "Full refund plus 100 EUR", actor_user=alice)

    row = queue_row(queue_html(signed_in(alice), four_eyes), draft)

    assert "You edited it: another person must approve it" in row
    assert EARLIER_BADGE not in row
    assert 'type="checkbox" name="item"' not in row


def test_an_approval_after_the_edit_lifts_the_mark_in_the_queue(
    four_eyes, mailbox_a, make_draft, member_of, signed_in
):
    """Approved by a colleague at a version after the edit, then reopened and revised by the
    agent: the edit was seen by a second person, the editor may approve again."""
    from intents import services
    from tests.intents.helpers import set_state
    from tests.intents.test_drafts import make_token

    alice, bob = (member_of(four_eyes, "approver").user for _ in range(2))
    token = make_token(four_eyes)
    draft = edited_then_revised_by_the_agent(four_eyes, make_draft, mailbox_a, alice, token)
    set_state(_approve(four_eyes, draft, bob), "failed")
    services.draft_reopen(tenant=four_eyes, draft_id=draft.pk, actor=bob, reason="try again")
    draft.refresh_from_db()
    _revise(four_eyes, draft, "Full refund plus 100 EUR, as agreed today.", agent_token=token)

    html = queue_html(signed_in(alice), four_eyes)

    assert draft.current_version == 5
    assert checkboxes(html) == [draft.pk]
    assert "data-approve-blocked" not in html
    assert _approve(four_eyes, draft, alice).state == SendIntent.State.QUEUED


def test_the_page_and_the_approval_ask_the_same_rule_for_one_draft_and_for_many(
    four_eyes, tenant_b, mailbox_a, mailbox_b, make_draft, member_of
):
    """The queue's one query for its page and the approval's question for one draft give the
    same answer for each draft; another tenant's draft is never in the answer, even for a
    person who wrote it there."""
    from intents.selectors.drafts import (
        drafts_they_wrote_since_last_approval,
        wrote_a_version_since_last_approval,
    )
    from tests.intents.test_drafts import make_token

    alice, bob = (member_of(four_eyes, "approver").user for _ in range(2))
    token = make_token(four_eyes)
    earlier = edited_then_revised_by_the_agent(four_eyes, make_draft, mailbox_a, alice, token)
    current = make_draft(mailbox_a, agent_token=token)
    _revise(four_eyes, current, "Edited", actor_user=alice)
    by_bob = make_draft(mailbox_a, agent_token=token)
    _revise(four_eyes, by_bob, "Edited", actor_user=bob)
    agents = make_draft(mailbox_a, agent_token=token)
    member_of(tenant_b, "approver", user=alice)  # a user of two tenants
    elsewhere = make_draft(mailbox_b, actor_user=alice)
    drafts = [earlier, current, by_bob, agents, elsewhere]

    found = drafts_they_wrote_since_last_approval(
        tenant=four_eyes, draft_ids=[d.pk for d in drafts], user=alice
    )

    assert found == {earlier.pk, current.pk}
    assert [wrote_a_version_since_last_approval(d, alice) for d in drafts[:4]] == [
        True,
        True,
        False,
        False,
    ]
    assert wrote_a_version_since_last_approval(elsewhere, alice)  # in its own tenant
    nobody = drafts_they_wrote_since_last_approval(
        tenant=four_eyes, draft_ids=[earlier.pk], user=None
    )
    assert nobody == set()


def test_the_queues_queries_do_not_grow_with_the_rows_it_marks(
    four_eyes, mailbox_a, make_draft, member_of, signed_in
):
    """One query for the whole page marks the rows of earlier versions, however many; with the
    policy off it is not asked at all."""
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    from tests.intents.test_drafts import make_token

    alice = member_of(four_eyes, "approver").user
    token = make_token(four_eyes)
    client = signed_in(alice)

    def count() -> tuple[int, int]:
        queue_html(client, four_eyes)  # what the page keeps in the session, kept the same
        with CaptureQueriesContext(connection) as queries:
            html = queue_html(client, four_eyes)
        # Less the query for drafts whose text changed under their HTML, asked of the rows
        # offered for bulk approval: with the policy off, these rows are offered too.
        asked = [q for q in queries.captured_queries if "sha256" not in q["sql"]]
        return len(asked), html.count('data-approve-blocked="earlier-version"')

    edited_then_revised_by_the_agent(four_eyes, make_draft, mailbox_a, alice, token)
    make_draft(mailbox_a, agent_token=token)
    few = count()
    for _ in range(4):
        edited_then_revised_by_the_agent(four_eyes, make_draft, mailbox_a, alice, token)
        make_draft(mailbox_a, agent_token=token)
    many = count()
    four_eyes.second_approver_on_edit = False
    four_eyes.save(update_fields=["second_approver_on_edit"])
    without_the_policy = count()

    assert (few[1], many[1], without_the_policy[1]) == (1, 5, 0)
    assert many[0] == few[0] == without_the_policy[0] + 1


def test_an_approval_taken_back_lets_no_editor_approve_alone(
    four_eyes, mailbox_a, make_draft, member_of
):
    """Found by an outside probe: an undone (or cancelled) approval still counted as the last
    one, so after Bob approved the agent's version on top of Alice's edit and then undid it, Alice
    could approve the copy alone: the colleague who withdrew was her second pair of eyes."""
    from intents import errors, services
    from tests.intents.test_drafts import make_token

    type(four_eyes).objects.filter(pk=four_eyes.pk).update(send_hold_seconds=60)
    four_eyes.refresh_from_db()
    alice, bob, carol = (member_of(four_eyes, "approver").user for _ in range(3))
    token = make_token(four_eyes)
    draft = edited_then_revised_by_the_agent(four_eyes, make_draft, mailbox_a, alice, token)
    intent = _approve(four_eyes, draft, bob)
    services.intent_undo(tenant=four_eyes, intent_id=intent.pk, actor=bob)
    draft.refresh_from_db()

    assert draft.current_version == 4
    with pytest.raises(errors.SecondApproverRequired):
        _approve(four_eyes, draft, alice)
    assert _approve(four_eyes, draft, carol).state == SendIntent.State.QUEUED
