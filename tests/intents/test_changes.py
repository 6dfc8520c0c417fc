"""The structured diff that agent events carry and the reviewer analytics measure."""

from __future__ import annotations

import difflib

import pytest

from intents import services
from intents.changes import MAX_MATCHED_TOKENS, change_from_agent, text_change, version_change
from intents.models import AgentEvent
from intents.services.event_endpoints import endpoint_create
from tenants.tokens import token_create

ALL_SCOPES = ("drafts:write", "drafts:read")
# A customer's long mail quoted back by the agent: about 107,000 characters, half the API's limit.
LONG_TEXT = " ".join(
    ("refund", "order", "the", "your", "parcel", "we")[i % 6] for i in range(20_000)
)


class _SmallSidesOnly(difflib.SequenceMatcher):
    """SequenceMatcher that refuses, at once, a side longer than the bound: its work grows with
    the product of the sides, and the whole long body compared with itself ran for 41 s."""

    def __init__(self, isjunk=None, a="", b="", autojunk=True):
        assert len(a) <= MAX_MATCHED_TOKENS and len(b) <= MAX_MATCHED_TOKENS, (len(a), len(b))
        super().__init__(isjunk, a, b, autojunk)


@pytest.fixture
def bounded_matcher(monkeypatch):
    monkeypatch.setattr(difflib, "SequenceMatcher", _SmallSidesOnly)


def test_text_change_counts_what_was_added_and_removed():
    change = text_change("We refunded your order.", "We refunded your whole order today.")

    assert change == {
        "ops": [{"op": "replace", "at": 17, "before": "order.", "after": "whole order today."}],
        "chars_added": len("whole order today."),
        "chars_removed": len("order."),
    }


def test_text_change_of_equal_text_is_empty_and_line_endings_do_not_count():
    assert text_change("a\r\nb", "a\nb") == {"ops": [], "chars_added": 0, "chars_removed": 0}


def test_replace_names_both_sides_at_its_offset():
    change = text_change("Hello Anna, thanks", "Hello Maria, thanks")

    assert change["ops"] == [{"op": "replace", "at": 6, "before": "Anna,", "after": "Maria,"}]
    assert (change["chars_added"], change["chars_removed"]) == (6, 5)


def test_change_from_agent_starts_at_the_agents_last_version(tenant_a, local_mailbox, approver):
    # actor None: made by an operator's command (an approver may not make tokens).
    token, _ = token_create(tenant=tenant_a, name="bot", scopes=ALL_SCOPES, actor=None)
    draft = services.draft_create(
        tenant=tenant_a,
        mailbox=local_mailbox,
        to=["ann@example.com"],
        subject="Your refund",
        text="We refunded it.",
        agent_token=token,
    )
    agent_v2 = services.draft_add_version(
        tenant=tenant_a,
        draft_id=draft.pk,
        to=["ann@example.com"],
        cc=[],
        bcc=[],
        subject="Your refund",
        text="We refunded your order.",
        html="",
        agent_token=token,
    )
    person_v3 = services.draft_add_version(
        tenant=tenant_a,
        draft_id=draft.pk,
        to=["ann@example.com"],
        cc=["Boss@Example.com"],
        bcc=[],
        subject="Your refund is on its way",
        text="We refunded your order today.",
        html="",
        actor_user=approver,
        base_version=2,
    )

    change = change_from_agent(person_v3)

    assert (change["from_version"], change["to_version"]) == (agent_v2.number, 3)
    assert change["changed"] is True
    assert change["subject"] == {"before": "Your refund", "after": "Your refund is on its way"}
    assert change["recipients"]["cc"] == {"added": ["boss@example.com"], "removed": []}
    assert change["recipients"]["to"] == {"added": [], "removed": []}
    text_edit = len("order.") + len("order today.")
    assert change["edit_size"] == text_edit + len(" is on its way") + 1


def test_an_unchanged_version_has_edit_size_zero(tenant_a, local_mailbox, approver):
    draft = services.draft_create(
        tenant=tenant_a,
        mailbox=local_mailbox,
        to=["ann@example.com"],
        subject="S",
        text="T",
        actor_user=approver,
    )
    v1 = draft.versions.get(number=1)

    change = version_change(v1, v1)

    assert change["changed"] is False
    assert change["edit_size"] == 0
    assert change["subject"] is None


def test_a_long_body_with_one_word_changed_names_that_word_in_bounded_work(bounded_matcher):
    at = LONG_TEXT.index("parcel", 50_000)
    after = LONG_TEXT[:at] + "letter" + LONG_TEXT[at + len("parcel") :]

    change = text_change(LONG_TEXT, after)

    assert change["ops"] == [{"op": "replace", "at": at, "before": "parcel", "after": "letter"}]
    assert text_change(LONG_TEXT, LONG_TEXT)["ops"] == []


def test_a_long_body_changed_at_both_ends_is_reported_whole_never_less(bounded_matcher):
    change = text_change("Dear Ann, " + LONG_TEXT + " Bye", "Hello Ann, " + LONG_TEXT + " Ciao")

    assert [(op["op"], op["at"]) for op in change["ops"]] == [("replace", 0)]
    assert change["ops"][0]["before"].startswith("Dear") and change["ops"][0]["after"].endswith(
        "Ciao"
    )


@pytest.mark.django_db
def test_approving_a_long_draft_with_an_agent_event_endpoint_computes_its_change_quickly(
    tenant_a, local_mailbox, approver, member_of, bounded_matcher
):
    """The draft.approved event carries the change from the agent's last version, computed in
    the approval's transaction: a long unedited body held the draft's lock for minutes (and the
    web worker was killed first, so the draft could not be approved at all)."""
    endpoint_create(
        tenant=tenant_a,
        url="https://agent.example.com/events",
        event_types=["draft.approved"],
        actor=member_of(tenant_a, "admin").user,
    )
    token, _ = token_create(tenant=tenant_a, name="bot", scopes=ALL_SCOPES, actor=None)
    draft = services.draft_create(
        tenant=tenant_a,
        mailbox=local_mailbox,
        to=["ann@example.com"],
        subject="Your refund",
        text=LONG_TEXT,
        agent_token=token,
    )
    version = draft.versions.get(number=1)

    services.draft_approve(
        tenant=tenant_a,
        draft_id=draft.pk,
        version=1,
        content_hash=version.content_hash,
        actor=approver,
    )

    change = AgentEvent.objects.get(draft=draft).payload["change"]
    assert (change["changed"], change["edit_size"]) == (False, 0)
