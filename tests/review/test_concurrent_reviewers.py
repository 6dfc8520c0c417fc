"""Team review at the same moment, from outside: two or three reviewers, each with their own
session and database connection, post on the same draft or the same queue page at once through
the staff pages. Every loser gets a page that says what happened and changes nothing, and the
sandbox AgentMail receives exactly one send per approved draft, of the version that was approved."""

from __future__ import annotations

import re
import threading

import pytest
from django.contrib.messages import get_messages
from django.db import connections
from django.db.models.functions import Now
from django.urls import reverse

from intents import services
from intents.models import Draft, DraftVersion, IntentEvent, SendIntent
from review.forms import EditForm
from tests.intents.conftest import fast_send  # noqa: F401
from tests.intents.helpers import drain_sends
from tests.routed_client import RoutedClient

pytestmark = pytest.mark.django_db(transaction=True)


def session_of(user) -> RoutedClient:
    client = RoutedClient()
    client.force_login(user, backend="django.contrib.auth.backends.ModelBackend")
    return client


def at_once(*calls) -> list:
    """Run each call (a function of no arguments) in its own thread, released together."""
    barrier = threading.Barrier(len(calls))
    results: list = [None] * len(calls)

    def run(i: int) -> None:
        try:
            barrier.wait()
            results[i] = calls[i]()
        except BaseException as exc:
            results[i] = exc
        finally:
            connections.close_all()

    threads = [threading.Thread(target=run, args=(i,)) for i in range(len(calls))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    return results


def approve_form(page: str) -> dict:
    """The approve form's fields as the draft page drew them."""
    form = re.search(r"<form[^>]*data-approve-form>(.*?)</form>", page, re.S).group(1)
    return dict(re.findall(r'<input type="hidden" name="(\w+)" value="([^"]*)"', form))


def edit_form(version, **changes) -> dict:
    """The edit form as the page fills it for ``version``, with ``changes``."""
    return {**EditForm.of_version(version).initial, **changes}


def flashes(response) -> list[str]:
    return [str(m) for m in get_messages(response.wsgi_request)]


def sent_texts(sandbox, draft) -> list[str]:
    """The text of every send the sandbox accepted for the draft (any of its intents)."""
    keys = SendIntent.objects.filter(draft=draft).values_list("idempotency_key", flat=True)
    return [s["text"] for key in keys for s in sandbox.ledger(idempotency_key=key)]


@pytest.fixture
def team(tenant_a, member_of, mailbox_factory, sandbox, fast_send):  # noqa: F811
    """A sandbox mailbox and three approvers, Ana, Ben and Cara, each signed in on their own."""
    import types

    mailbox = mailbox_factory(tenant_a)
    people = [member_of(tenant_a, "approver").user for _ in range(3)]
    counter = iter(range(1, 10_000))

    def draft(**fields):
        n = next(counter)
        values = {
            "tenant": tenant_a,
            "mailbox": mailbox,
            "to": [f"customer{n}@example.com"],
            "subject": f"Your refund #{n}",
            "text": f"Draft {n}: we refunded your order.",
            "actor_user": people[2],
            **fields,
        }
        return services.draft_create(**values)

    return types.SimpleNamespace(
        tenant=tenant_a,
        mailbox=mailbox,
        sandbox=sandbox,
        ana=people[0],
        ben=people[1],
        cara=people[2],
        draft=draft,
        url=lambda name, *args: reverse(name, args=[tenant_a.slug, *args]),
    )


def test_approve_and_edit_at_once_one_wins_and_one_send_of_the_approved_text(team):
    outcomes = set()
    for _ in range(4):
        draft = team.draft()
        first = draft.versions.get()
        ana, ben = session_of(team.ana), session_of(team.ben)
        seen = approve_form(ana.get(team.url("draft", draft.pk)).content.decode())
        edit = edit_form(first, text="Ben's careful wording.")
        approval, save = at_once(
            lambda: ana.post(team.url("draft_approve", draft.pk), seen),
            lambda: ben.post(team.url("draft_edit", draft.pk), edit),
        )
        draft.refresh_from_db()
        if draft.status == "approved":
            outcomes.add("approved")
            assert approval.status_code == 302
            assert save.status_code == 409
            assert "approved version 1" in save.content.decode()
            assert "Ben&#x27;s careful wording.</textarea>" in save.content.decode()
            assert draft.current_version == 1
        else:
            outcomes.add("edited")
            assert save.status_code == 302
            assert approval.status_code == 409
            assert "Version 2 is current" in approval.content.decode()
            assert not SendIntent.objects.filter(draft=draft).exists()
            again = approve_form(ana.get(team.url("draft", draft.pk)).content.decode())
            assert ana.post(team.url("draft_approve", draft.pk), again).status_code == 302
    drain_sends()
    for draft in Draft.objects.filter(tenant=team.tenant):
        intent = SendIntent.objects.get(draft=draft)
        assert sent_texts(team.sandbox, draft) == [intent.draft_version.text]
    assert outcomes


def test_approve_and_reject_at_once_one_decision_and_the_loser_is_told(team):
    for _ in range(3):
        draft = team.draft()
        ana, ben = session_of(team.ana), session_of(team.ben)
        seen = approve_form(ana.get(team.url("draft", draft.pk)).content.decode())
        approval, rejection = at_once(
            lambda: ana.post(team.url("draft_approve", draft.pk), seen),
            lambda: ben.post(
                team.url("draft_reject", draft.pk), {"reason": "Wrong amount.", "version": 1}
            ),
        )
        draft.refresh_from_db()
        decisions = IntentEvent.objects.filter(
            draft=draft, action__in=["draft.approved", "draft.rejected"]
        )
        assert decisions.count() == 1
        loser = rejection if draft.status == "approved" else approval
        assert loser.status_code == 409, loser.content.decode()[:500]
        body = loser.content.decode()
        assert "approved version 1" in body or "rejected version 1" in body
    drain_sends()
    for draft in Draft.objects.filter(tenant=team.tenant):
        expected = 1 if draft.status == "approved" else 0
        assert len(sent_texts(team.sandbox, draft)) == expected


def test_two_approvals_of_two_versions_at_once_only_the_current_one_goes(team):
    draft = team.draft()
    ana, ben, cara = session_of(team.ana), session_of(team.ben), session_of(team.cara)
    ana_saw = approve_form(ana.get(team.url("draft", draft.pk)).content.decode())
    assert (
        ben.post(
            team.url("draft_edit", draft.pk), edit_form(draft.versions.get(), text="Version two.")
        ).status_code
        == 302
    )
    ben_saw = approve_form(ana.get(team.url("draft", draft.pk)).content.decode())
    old, new = at_once(
        lambda: ana.post(team.url("draft_approve", draft.pk), ana_saw),
        lambda: cara.post(team.url("draft_approve", draft.pk), ben_saw),
    )
    assert new.status_code == 302
    assert old.status_code == 409
    drain_sends()
    assert sent_texts(team.sandbox, draft) == ["Version two."]


def test_bulk_approve_while_a_row_is_edited_approves_exactly_the_rows_shown(team):
    drafts = [team.draft() for _ in range(6)]
    ana, ben = session_of(team.ana), session_of(team.ben)
    queue = ana.get(team.url("tenant_home")).content.decode()
    items = re.findall(r'name="item" value="([^"]+)"', queue)
    assert len(items) == 6
    edited = drafts[3]
    edit = edit_form(edited.versions.get(), text="Ben's edit of the fourth.")
    bulk, save = at_once(
        lambda: ana.post(team.url("bulk_approve"), {"item": items}),
        lambda: ben.post(team.url("draft_edit", edited.pk), edit),
    )
    edited.refresh_from_db()
    said = flashes(bulk)
    if edited.status == "approved":
        assert save.status_code == 409
        assert "Approved 6 drafts" in " ".join(said)
    else:
        assert save.status_code == 302
        assert any(f"Draft {edited.pk} was not approved" in s for s in said), said
        assert not SendIntent.objects.filter(draft=edited).exists()
    drain_sends()
    for draft in drafts:
        intents = list(SendIntent.objects.filter(draft=draft))
        for intent in intents:
            assert intent.draft_version.number == 1
        expected = [draft.versions.get(number=1).text] if intents else []
        assert sent_texts(team.sandbox, draft) == expected


def test_an_edit_after_a_colleague_approved_but_before_the_send_changes_nothing(team):
    """Four-eyes: Ana edited, Ben approved her version; Ana's later save (her tab still open on
    the edit page) is refused with who approved what, and the send carries Ben's approved text."""
    team.tenant.second_approver_on_edit = True
    team.tenant.send_hold_seconds = 30
    team.tenant.save(update_fields=["second_approver_on_edit", "send_hold_seconds"])
    draft = team.draft()
    ana, ben = session_of(team.ana), session_of(team.ben)
    saved = ana.post(
        team.url("draft_edit", draft.pk), edit_form(draft.versions.get(), text="Ana's text.")
    )
    assert saved.status_code == 302
    second = DraftVersion.objects.get(draft=draft, number=2)
    assert (
        ben.post(
            team.url("draft_approve", draft.pk),
            approve_form(ben.get(team.url("draft", draft.pk)).content.decode()),
        ).status_code
        == 302
    )

    late = ana.post(team.url("draft_edit", draft.pk), edit_form(second, text="Ana again."))

    body = late.content.decode()
    assert late.status_code == 409
    assert "approved version 2" in body and "Ana again.</textarea>" in body
    assert DraftVersion.objects.filter(draft=draft).count() == 2
    # The undo window is not what this test is about: the send is made due now.
    SendIntent.objects.filter(draft=draft).update(hold_until=Now(), next_attempt_at=Now())
    drain_sends()
    assert sent_texts(team.sandbox, draft) == ["Ana's text."]


def test_the_editor_approving_through_every_route_at_once_with_a_colleague_one_send(team):
    """Four-eyes: Ana wrote version 2; her draft page (htmx and plain), a bulk post and the
    progressive bulk post all race Ben's approval. Only Ben's goes; each of Ana's says why."""
    team.tenant.second_approver_on_edit = True
    team.tenant.save(update_fields=["second_approver_on_edit"])
    draft = team.draft()
    ana_tabs = [session_of(team.ana) for _ in range(4)]
    ben = session_of(team.ben)
    assert (
        ana_tabs[0]
        .post(team.url("draft_edit", draft.pk), edit_form(draft.versions.get(), text="Ana's text."))
        .status_code
        == 302
    )
    form = approve_form(ben.get(team.url("draft", draft.pk)).content.decode())
    item = f"{draft.pk}:{form['version']}:{form['content_hash']}"
    approve, bulk = team.url("draft_approve", draft.pk), team.url("bulk_approve")
    results = at_once(
        lambda: ana_tabs[0].post(approve, form),
        lambda: ana_tabs[1].post(approve, form, headers={"HX-Request": "true"}),
        lambda: ana_tabs[2].post(bulk, {"item": item}),
        lambda: ana_tabs[3].post(bulk, {"item": item}, headers={"X-Bulk-Progress": "1"}),
        lambda: ben.post(approve, form),
    )
    assert results[4].status_code == 302
    intent = SendIntent.objects.get(draft=draft)
    assert intent.approver == team.ben
    plain, fragment, whole, progressive = results[:4]
    assert plain.status_code in (403, 409)
    assert fragment.status_code in (200, 403, 409)
    assert whole.status_code == 302 and any(
        f"Draft {draft.pk} was not approved" in s for s in flashes(whole)
    )
    assert progressive.json()["approved"] == 0 and progressive.json()["refused"]
    drain_sends()
    assert sent_texts(team.sandbox, draft) == ["Ana's text."]


def test_undo_posted_while_the_worker_claims_sends_once_or_not_at_all(team):
    from intents import sending

    team.tenant.send_hold_seconds = 1
    team.tenant.save(update_fields=["send_hold_seconds"])
    outcomes = []
    for margin in (0.3, 0.1, 0.0, -0.05):
        draft = team.draft()
        ana, ben = session_of(team.ana), session_of(team.ben)
        form = approve_form(ana.get(team.url("draft", draft.pk)).content.decode())
        assert ana.post(team.url("draft_approve", draft.pk), form).status_code == 302
        intent = SendIntent.objects.get(draft=draft)
        stop = threading.Event()

        def worker():
            while not stop.is_set():
                sending.run_once(worker="probe", limit=5)

        def undo(intent=intent, margin=margin, ben=ben):
            import time

            from config.clock import db_now

            left = (intent.hold_until - db_now()).total_seconds() - margin
            if left > 0:
                time.sleep(left)
            return ben.post(team.url("intent_undo", intent.pk))

        results = at_once(worker, lambda: (undo(), stop.set())[0])
        response = results[1]
        intent.refresh_from_db()
        draft.refresh_from_db()
        sent = sent_texts(team.sandbox, draft)
        if intent.state == "cancelled":
            outcomes.append("undone")
            assert sent == [] and draft.status == "pending"
            assert any("Undone: nothing was sent" in s for s in flashes(response))
        else:
            outcomes.append("sent")
            assert any("Too late to undo" in s for s in flashes(response)), flashes(response)
            drain_sends()
            assert sent_texts(team.sandbox, draft) == [intent.draft_version.text]
    assert outcomes


def test_two_reopens_and_a_stale_approval_at_once_one_reopen_and_one_send_later(team):
    """Send #1 failed. Ana and Ben reopen it from the send page at once while Cara posts the
    approval of version 1 her tab still shows: one reopen wins, the other reopen and the old
    approval are told why; a fresh approval of the copy sends once, under a new key."""
    draft = team.draft()
    ana, ben, cara = session_of(team.ana), session_of(team.ben), session_of(team.cara)
    stale = approve_form(cara.get(team.url("draft", draft.pk)).content.decode())
    assert ana.post(team.url("draft_approve", draft.pk), stale).status_code == 302
    first = SendIntent.objects.get(draft=draft)
    SendIntent.objects.filter(pk=first.pk).update(state="failed")  # data setup: it failed
    reopen = team.url("intent_reopen", first.pk)
    results = at_once(
        lambda: ana.post(reopen, {"reason": "Try again."}),
        lambda: ben.post(reopen, {"reason": "Send it."}),
        lambda: cara.post(team.url("draft_approve", draft.pk), stale),
    )
    draft.refresh_from_db()
    assert (draft.status, draft.current_version) == ("pending", 2)
    said = [flashes(r) for r in results[:2]]
    assert sum("is back in the review queue as version 2" in " ".join(s) for s in said) == 1
    assert sum("already back in the review queue" in " ".join(s) for s in said) == 1
    assert results[2].status_code == 409
    assert IntentEvent.objects.filter(draft=draft, action="draft.reopened").count() == 1
    fresh = approve_form(ben.get(team.url("draft", draft.pk)).content.decode())
    assert ben.post(team.url("draft_approve", draft.pk), fresh).status_code == 302
    drain_sends()
    second = SendIntent.objects.exclude(pk=first.pk).get(draft=draft)
    assert second.idempotency_key != first.idempotency_key
    assert sent_texts(team.sandbox, draft) == [draft.versions.get(number=1).text]


def test_hand_take_and_approve_at_once_the_approval_stands_and_the_others_are_told(team):
    for _ in range(3):
        draft = team.draft()
        ana, ben, cara = session_of(team.ana), session_of(team.ben), session_of(team.cara)
        form = approve_form(ana.get(team.url("draft", draft.pk)).content.decode())
        services.draft_take(tenant=team.tenant, draft_id=draft.pk, actor=team.ben)
        approval, hand, take = at_once(
            lambda: ana.post(team.url("draft_approve", draft.pk), form),
            lambda: ben.post(team.url("draft_hand", draft.pk), {"to": team.cara.pk}),
            lambda: cara.post(team.url("draft_take", draft.pk)),
        )
        draft.refresh_from_db()
        assert approval.status_code == 302
        assert draft.status == "approved" and draft.assignee_id is None
        for response in (hand, take):
            assert response.status_code == 302
        for said in flashes(hand) + flashes(take):
            assert said.startswith(
                (f"{team.ana.display_name} approved version 1 at ", "Handed to", "You hold")
            ) or said.endswith("ask them to hand it to you or release it."), said
        late = [
            e.action
            for e in IntentEvent.objects.filter(draft=draft).order_by("id")
            if e.action in ("draft.approved", "draft.handed", "draft.taken")
        ]
        assert late[-1] == "draft.approved"
    drain_sends()
    for draft in Draft.objects.filter(tenant=team.tenant):
        assert len(sent_texts(team.sandbox, draft)) == 1


def test_taking_or_handing_a_draft_a_colleague_just_approved_says_who_and_when(team):
    """The take and hand buttons of a page loaded before the approval said the agent API's
    words: "already approved: version 1 was approved at 2026-12-06T07:30:45Z", in UTC and
    without the name the draft page gives."""
    draft = team.draft()
    ana, ben = session_of(team.ana), session_of(team.ben)
    form = approve_form(ana.get(team.url("draft", draft.pk)).content.decode())
    assert ana.post(team.url("draft_approve", draft.pk), form).status_code == 302
    events = IntentEvent.objects.count()

    take = ben.post(team.url("draft_take", draft.pk))
    hand = ben.post(team.url("draft_hand", draft.pk), {"to": team.cara.pk})

    for response in (take, hand):
        said = flashes(response)[-1]
        assert said.startswith(f"{team.ana.display_name} approved version 1 at "), said
        assert "Z." not in said
    assert IntentEvent.objects.count() == events


def test_two_bulk_approvals_of_the_same_page_approve_each_draft_once_and_say_who_did(team):
    drafts = [team.draft() for _ in range(5)]
    ana, ben = session_of(team.ana), session_of(team.ben)
    items = re.findall(
        r'name="item" value="([^"]+)"', ana.get(team.url("tenant_home")).content.decode()
    )
    progressive = {"X-Bulk-Progress": "1"}
    whole, rows = at_once(
        lambda: ana.post(team.url("bulk_approve"), {"item": items}),
        lambda: [
            ben.post(team.url("bulk_approve"), {"item": i}, headers=progressive) for i in items
        ],
    )
    approvers = dict(SendIntent.objects.values_list("draft_id", "approver_id"))
    assert sorted(approvers) == sorted(d.pk for d in drafts)
    names = {team.ana.pk: team.ana.display_name, team.ben.pk: team.ben.display_name}
    ana_refused = [s for s in flashes(whole) if "was not approved" in s]
    ben_refused = [r.json()["refused"][0] for r in rows if r.json()["refused"]]
    ben_approved = sum(r.json()["approved"] for r in rows)
    assert (len(items) - len(ana_refused)) + ben_approved == 5
    assert len(ana_refused) + len(ben_refused) == 5
    for said in ana_refused:
        draft_id = int(re.search(r"Draft (\d+) was not approved", said)[1])
        assert f"{names[approvers[draft_id]]} approved version 1 at " in said, said
    for refusal in ben_refused:
        who = names[approvers[refusal["draft"]]]
        assert refusal["message"].startswith(f"{who} approved version 1 at "), refusal
    drain_sends()
    for draft in drafts:
        assert sent_texts(team.sandbox, draft) == [draft.versions.get().text]


def test_escalation_sweeps_and_approvals_at_once_leave_approved_drafts_unheld(team):
    """Two sweeps escalate breached drafts to Cara while Ana approves them from their pages: an
    approved draft is never left held or escalated after its approval, each goes out once."""
    from datetime import timedelta

    from django.utils import timezone

    from intents.services.deadlines import drafts_escalate_due
    from tenants.models import Tenant

    Tenant.objects.filter(pk=team.tenant.pk).update(escalate_to=team.cara)
    drafts = [team.draft() for _ in range(6)]
    Draft.objects.filter(pk__in=[d.pk for d in drafts]).update(
        sla_due_at=timezone.now() - timedelta(minutes=1)
    )
    ana = session_of(team.ana)
    forms = {d.pk: approve_form(ana.get(team.url("draft", d.pk)).content.decode()) for d in drafts}
    tabs = [session_of(team.ana) for _ in drafts]
    calls = [
        (lambda d=d, tab=tab: tab.post(team.url("draft_approve", d.pk), forms[d.pk]))
        for d, tab in zip(drafts, tabs, strict=True)
    ]
    results = at_once(*calls, drafts_escalate_due, drafts_escalate_due)
    assert [r.status_code for r in results[:6]] == [302] * 6
    assert sum(results[6:]) <= 6
    for draft in Draft.objects.filter(pk__in=[d.pk for d in drafts]):
        assert (draft.status, draft.assignee_id, draft.assigned_how) == ("approved", None, "")
        actions = list(
            IntentEvent.objects.filter(draft=draft).order_by("id").values_list("action", flat=True)
        )
        assert actions.count("draft.escalated") <= 1
        assert actions.index("draft.approved") > max(
            (i for i, a in enumerate(actions) if a == "draft.escalated"), default=-1
        )
    drain_sends()
    for draft in drafts:
        assert len(sent_texts(team.sandbox, draft)) == 1
