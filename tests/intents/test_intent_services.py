import pytest

from intents import errors, selectors, services
from intents.models import Draft, IntentEvent
from tenants.templatetags.zones import zoned
from tests.intents.helpers import set_state

pytestmark = pytest.mark.django_db


def test_cancel_queued(tenant_a, intent, approver):
    cancelled = services.intent_cancel(
        tenant=tenant_a, intent_id=intent.pk, actor=approver, reason="customer called"
    )
    assert cancelled.state == "cancelled"
    event = IntentEvent.objects.get(intent=intent, action="intent.cancelled")
    assert (event.from_state, event.to_state, event.reason) == (
        "queued",
        "cancelled",
        "customer called",
    )


@pytest.mark.parametrize("state", ["sending", "uncertain", "accepted", "failed", "blocked"])
def test_cancel_refused_once_it_may_have_gone(tenant_a, intent, approver, state):
    set_state(intent, state, provider_message_id="m" if state == "accepted" else "")
    with pytest.raises(errors.IntentError) as caught:
        services.intent_cancel(tenant=tenant_a, intent_id=intent.pk, actor=approver)
    assert caught.value.code == "not_cancellable"
    intent.refresh_from_db()
    assert intent.state == state


def test_cancel_needs_right_and_tenant(tenant_a, tenant_b, intent, member_of):
    viewer = member_of(tenant_a, "viewer").user
    with pytest.raises(errors.NoRight):
        services.intent_cancel(tenant=tenant_a, intent_id=intent.pk, actor=viewer)
    admin_b = member_of(tenant_b, "admin").user
    with pytest.raises(errors.NotFound):
        services.intent_cancel(tenant=tenant_b, intent_id=intent.pk, actor=admin_b)


def test_resolve_accepted_from_needs_attention(tenant_a, intent, approver):
    set_state(intent, "needs_attention")
    resolved = services.intent_resolve_accepted(
        tenant=tenant_a,
        intent_id=intent.pk,
        actor=approver,
        provider_message_id="<abc@agentmail.to>",
        evidence="Seen in the customer's reply",
    )
    assert (resolved.state, resolved.provider_message_id) == ("accepted", "<abc@agentmail.to>")
    assert resolved.resolved_by == approver
    assert IntentEvent.objects.filter(intent=intent, action="intent.resolved_accepted").count() == 1


def test_resolve_accepted_refuses_a_message_id_another_send_has(
    tenant_a, intent, new_draft, approver
):
    """Delivery events find their send by this id: given twice, one send would get the other's
    deliveries and bounces."""
    other_draft = new_draft()
    other = services.draft_approve(
        tenant=tenant_a,
        draft_id=other_draft.pk,
        version=1,
        content_hash=other_draft.versions.get().content_hash,
        actor=approver,
    )
    set_state(other, "accepted", provider_message_id="<theirs@agentmail.to>")
    set_state(intent, "needs_attention")
    with pytest.raises(errors.InvalidInput) as refused:
        services.intent_resolve_accepted(
            tenant=tenant_a,
            intent_id=intent.pk,
            actor=approver,
            provider_message_id=" <theirs@agentmail.to> ",
            evidence="The customer's copy",
        )
    assert refused.value.code == "message_id_taken"
    intent.refresh_from_db()
    assert (intent.state, intent.provider_message_id) == ("needs_attention", "")
    assert not IntentEvent.objects.filter(intent=intent, action="intent.resolved_accepted").exists()


@pytest.mark.parametrize(
    ("typed", "named"),
    [
        ("<abc@agentmail.to>\x01", "U+0001"),
        ("<abc @agentmail.to>", "U+0020"),
        ("<abc@agent\tmail.to>", "U+0009"),
        ("<abc@agentmail.to>\u202e", "U+202E"),
        ("<abc@agentmail\u00a0.to>", "U+00A0"),
    ],
)
def test_resolve_accepted_refuses_a_message_id_no_webhook_could_name(
    tenant_a, intent, approver, typed, named
):
    """Found by an outside probe: an id typed with a control character or a space inside was
    recorded; no delivery event or lookup names such an id, so the send waited for ever."""
    set_state(intent, "needs_attention")
    with pytest.raises(errors.InvalidInput) as refused:
        services.intent_resolve_accepted(
            tenant=tenant_a,
            intent_id=intent.pk,
            actor=approver,
            provider_message_id=typed,
            evidence="The customer's copy",
        )
    assert refused.value.code == "message_id_invalid"
    assert named in refused.value.message
    intent.refresh_from_db()
    assert (intent.state, intent.provider_message_id) == ("needs_attention", "")
    assert not IntentEvent.objects.filter(intent=intent, action="intent.resolved_accepted").exists()


def test_resolve_accepted_refuses_other_states_and_missing_evidence(tenant_a, intent, approver):
    with pytest.raises(errors.IntentError):
        services.intent_resolve_accepted(
            tenant=tenant_a,
            intent_id=intent.pk,
            actor=approver,
            provider_message_id="m",
            evidence="x",
        )
    set_state(intent, "needs_attention")
    with pytest.raises(errors.InvalidInput):
        services.intent_resolve_accepted(
            tenant=tenant_a,
            intent_id=intent.pk,
            actor=approver,
            provider_message_id="",
            evidence="x",
        )
    with pytest.raises(errors.InvalidInput):
        services.intent_resolve_accepted(
            tenant=tenant_a,
            intent_id=intent.pk,
            actor=approver,
            provider_message_id="m",
            evidence="",
        )
    intent.refresh_from_db()
    assert intent.state == "needs_attention"


def test_hold_and_release(tenant_a, intent, approver):
    held = services.intent_hold(tenant=tenant_a, intent_id=intent.pk, reason="customer wrote again")
    assert (held.state, held.held_reason) == ("queued", "customer wrote again")
    released = services.intent_release(tenant=tenant_a, intent_id=intent.pk, actor=approver)
    assert (released.state, released.held_reason) == ("queued", "")
    with pytest.raises(errors.IntentError):
        services.intent_release(tenant=tenant_a, intent_id=intent.pk, actor=approver)
    actions = list(
        IntentEvent.objects.filter(intent=intent).order_by("id").values_list("action", flat=True)
    )
    assert actions[-2:] == ["intent.held", "intent.released"]


def test_hold_only_queued(tenant_a, intent):
    set_state(intent, "sending")
    with pytest.raises(errors.IntentError):
        services.intent_hold(tenant=tenant_a, intent_id=intent.pk, reason="x")


# --- selectors -----------------------------------------------------------------------------------


def test_draft_detail_has_versions_intent_and_journal(tenant_a, intent):
    detail = selectors.draft_detail(tenant=tenant_a, draft_id=intent.draft_id)
    assert [v.number for v in detail.versions] == [1]
    assert detail.current.number == 1
    assert detail.intent == intent
    assert detail.attempts == []
    assert [e.action for e in detail.events] == [
        "draft.created",
        "draft.approved",
        "intent.created",
    ]


def test_selectors_hide_other_tenants(tenant_b, intent):
    with pytest.raises(errors.NotFound):
        selectors.draft_detail(tenant=tenant_b, draft_id=intent.draft_id)
    with pytest.raises(errors.NotFound):
        selectors.intent_get(tenant=tenant_b, intent_id=intent.pk)
    assert selectors.outbox(tenant=tenant_b).items == []
    assert selectors.intent_counts(tenant=tenant_b)["queued"] == 0


def test_queue_cursor_pagination_visits_each_draft_once(tenant_a, new_draft):
    created = [new_draft(subject=f"n{i}").pk for i in range(7)]
    seen, cursor = [], None
    for _ in range(10):
        page = selectors.draft_queue(tenant=tenant_a, cursor=cursor, limit=3)
        seen += [d.pk for d in page.items]
        cursor = page.next_cursor
        if cursor is None:
            break
    assert seen == created
    assert all(d.current.number == 1 for d in selectors.draft_queue(tenant=tenant_a).items)


def test_queue_rejects_garbage_cursor(tenant_a):
    with pytest.raises(errors.InvalidInput):
        selectors.draft_queue(tenant=tenant_a, cursor="!!!")


def test_intent_counts_and_outbox(tenant_a, intent, new_draft):
    new_draft()
    assert selectors.intent_counts(tenant=tenant_a)["queued"] == 1
    assert [i.pk for i in selectors.outbox(tenant=tenant_a, state="queued").items] == [intent.pk]
    assert selectors.outbox(tenant=tenant_a, state="accepted").items == []
    assert selectors.oldest_queued_age_seconds(tenant=tenant_a) >= 0


def test_queue_query_count_does_not_grow(tenant_a, new_draft, django_assert_max_num_queries):
    for i in range(5):
        new_draft(subject=f"q{i}")
    with django_assert_max_num_queries(3):
        page = selectors.draft_queue(tenant=tenant_a)
        _ = [(d.mailbox.address, d.current.subject) for d in page.items]
    assert Draft.objects.count() == 5


def test_resolve_accepted_refuses_a_send_a_newer_approval_superseded(
    tenant_a, intent, approver, member_of
):
    """Found by an outside probe: reopen, approve again (the new send queued), then record the
    old send as accepted: both went out, the worker never looking back."""
    other = member_of(tenant_a, "approver").user
    set_state(intent, "needs_attention")
    services.draft_reopen(tenant=tenant_a, draft_id=intent.draft_id, actor=approver, reason="again")
    draft = Draft.objects.get(pk=intent.draft_id)
    version = draft.versions.get(number=draft.current_version)
    newer = services.draft_approve(
        tenant=tenant_a,
        draft_id=draft.pk,
        version=version.number,
        content_hash=version.content_hash,
        actor=other,
    )

    def resolve():
        return services.intent_resolve_accepted(
            tenant=tenant_a,
            intent_id=intent.pk,
            actor=approver,
            provider_message_id="<old@agentmail.to>",
            evidence="The customer quoted it",
        )

    with pytest.raises(errors.IntentError) as refused:
        resolve()
    assert refused.value.code == "superseded"
    intent.refresh_from_db()
    assert intent.state == "needs_attention"
    services.intent_cancel(tenant=tenant_a, intent_id=newer.pk, actor=other, reason="old one went")
    assert resolve().state == "accepted"


# Found by probe 4 (two approvers): the second of two cancellations was told only "A send that is
# cancelled cannot be cancelled.", and did not know who had, or when, or whether it was an undo.
def test_a_cancel_that_lost_to_a_colleagues_names_them_and_when(
    tenant_a, intent, approver, member_of
):
    ana = member_of(tenant_a, "approver", user__full_name="Ana Lima").user
    services.intent_cancel(tenant=tenant_a, intent_id=intent.pk, actor=ana)
    with pytest.raises(errors.IntentError) as caught:
        services.intent_cancel(tenant=tenant_a, intent_id=intent.pk, actor=approver)

    event = IntentEvent.objects.get(intent=intent, action="intent.cancelled")
    assert caught.value.code == "not_cancellable"
    assert caught.value.message == (
        f"Ana Lima cancelled this send at {zoned(event.created_at, 'j M, H:i')}."
    )
    assert IntentEvent.objects.filter(intent=intent, action="intent.cancelled").count() == 1
