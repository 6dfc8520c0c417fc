"""The structured diff that agent events carry and the reviewer analytics measure."""

from __future__ import annotations

from intents import services
from intents.changes import change_from_agent, text_change, version_change
from tenants.tokens import token_create

ALL_SCOPES = ("drafts:write", "drafts:read")


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
