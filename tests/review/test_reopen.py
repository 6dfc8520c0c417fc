"""Re-approve as a new send from the send page and the needs-attention view: role-checked like
approve, the draft back in the queue with a new version, a plain warning when the earlier send may
already have been delivered."""

import pytest
from django.urls import reverse

from intents.models import Draft, DraftVersion, IntentEvent, SendIntent

pytestmark = pytest.mark.django_db


def reopen(client, tenant, intent, reason="the customer asked again"):
    return client.post(reverse("intent_reopen", args=[tenant.slug, intent.pk]), {"reason": reason})


def test_reopen_from_the_send_page_puts_the_draft_back_in_the_queue(
    tenant_a, mailbox_a, make_intent, admin_a, signed_in
):
    intent = make_intent(mailbox_a, state="failed", last_error_code="unprocessable")
    client = signed_in(admin_a.user)
    page = client.get(reverse("outbox_intent", args=[tenant_a.slug, intent.pk])).content.decode()
    assert "data-reopen-form" in page
    assert "data-reopen-warning" not in page
    response = reopen(client, tenant_a, intent)
    assert response.status_code == 302
    assert response["Location"] == reverse("draft", args=[tenant_a.slug, intent.draft_id])
    draft = Draft.objects.get(pk=intent.draft_id)
    assert (draft.status, draft.current_version) == ("pending", 2)
    draft_page = client.get(response["Location"]).content.decode()
    assert "data-reopened" in draft_page
    assert 'name="version" value="2"' in draft_page
    assert "data-approve" in draft_page
    queue = client.get(reverse("tenant_home", args=[tenant_a.slug])).content.decode()
    assert reverse("draft", args=[tenant_a.slug, draft.pk]) in queue
    attention = client.get(reverse("attention", args=[tenant_a.slug]))
    assert attention.context["intents"] == []


def test_needs_attention_warns_that_the_earlier_send_may_have_been_delivered(
    tenant_a, mailbox_a, make_intent, admin_a, signed_in
):
    intent = make_intent(mailbox_a, state="needs_attention", attempts=2)
    client = signed_in(admin_a.user)
    attention = client.get(reverse("attention", args=[tenant_a.slug])).content.decode()
    assert f'id="reopen-{intent.pk}"' in attention
    assert f"AgentMail may already have delivered send #{intent.pk}" in attention
    send_page = client.get(reverse("outbox_intent", args=[tenant_a.slug, intent.pk]))
    assert "data-reopen-warning" in send_page.content.decode()
    response = reopen(client, tenant_a, intent, reason="not in the customer's inbox")
    draft_page = client.get(response["Location"]).content.decode()
    assert "data-resend-warning" in draft_page
    assert f"AgentMail may already have delivered send #{intent.pk}" in draft_page
    event = IntentEvent.objects.get(action="draft.reopened")
    assert (event.actor_user, event.reason, event.data["earlier_may_have_gone_out"]) == (
        admin_a.user,
        "not in the customer's inbox",
        True,
    )


def test_live_or_accepted_send_has_no_reopen_and_a_forged_post_changes_nothing(
    tenant_a, mailbox_a, make_intent, admin_a, signed_in
):
    queued = make_intent(mailbox_a, state="queued")
    accepted = make_intent(mailbox_a, state="accepted")
    client = signed_in(admin_a.user)
    for intent in (queued, accepted):
        page = client.get(reverse("outbox_intent", args=[tenant_a.slug, intent.pk]))
        assert "data-reopen-form" not in page.content.decode()
        response = reopen(client, tenant_a, intent)
        assert response["Location"] == reverse("outbox_intent", args=[tenant_a.slug, intent.pk])
    messages = [str(m) for m in client.get(response["Location"]).context["messages"]]
    assert any("was accepted by AgentMail" in m for m in messages)
    assert set(Draft.objects.values_list("status", flat=True)) == {"approved"}
    assert DraftVersion.objects.count() == 2


def test_reopen_needs_a_reason(tenant_a, mailbox_a, make_intent, admin_a, signed_in):
    intent = make_intent(mailbox_a, state="blocked")
    client = signed_in(admin_a.user)
    response = reopen(client, tenant_a, intent, reason="")
    assert response["Location"] == reverse("outbox_intent", args=[tenant_a.slug, intent.pk])
    assert Draft.objects.get(pk=intent.draft_id).status == "approved"


def test_reopen_is_role_checked_like_approve(
    tenant_a, mailbox_a, make_intent, member_of, signed_in, client
):
    intent = make_intent(mailbox_a, state="failed")
    viewer = member_of(tenant_a, "viewer").user
    limited = member_of(tenant_a, "approver", approve_all_mailboxes=False).user
    for user in (viewer, limited):
        client.force_login(user)
        page = client.get(reverse("outbox_intent", args=[tenant_a.slug, intent.pk]))
        assert "data-reopen-form" not in page.content.decode()
        assert reopen(client, tenant_a, intent).status_code == 403
    assert Draft.objects.get(pk=intent.draft_id).status == "approved"
    assert SendIntent.objects.get(pk=intent.pk).state == "failed"


def test_another_tenants_send_is_a_404(
    tenant_a, tenant_b, mailbox_b, make_intent, admin_a, signed_in
):
    theirs = make_intent(mailbox_b, state="failed")
    response = reopen(signed_in(admin_a.user), tenant_a, theirs)
    assert response.status_code == 404
    assert Draft.objects.get(pk=theirs.draft_id).status == "approved"


def test_health_panel_does_not_count_a_send_replaced_by_a_reopen(
    tenant_a, mailbox_a, make_intent, admin_a, signed_in
):
    from console.selectors import health

    intent = make_intent(mailbox_a, state="needs_attention")
    assert health(tenant_a).needs_attention == 1
    reopen(signed_in(admin_a.user), tenant_a, intent)
    assert health(tenant_a).needs_attention == 0


def test_reopen_from_an_older_sends_page_is_refused_and_names_the_latest(
    tenant_a, mailbox_a, make_intent, admin_a, signed_in
):
    """Found by the concurrent-reviewers probe: "Reopen" on send #1's page (opened before the
    draft was reopened and approved again) reopened send #2, copying the version #2 approved,
    which that page did not show, while the message named #1."""
    from intents import services

    first = make_intent(mailbox_a, state="failed", last_error_code="unprocessable")
    client = signed_in(admin_a.user)
    assert reopen(client, tenant_a, first).status_code == 302
    version = DraftVersion.objects.get(draft_id=first.draft_id, number=2)
    second = services.draft_approve(
        tenant=tenant_a,
        draft_id=first.draft_id,
        version=2,
        content_hash=version.content_hash,
        actor=admin_a.user,
    )
    SendIntent.objects.filter(pk=second.pk).update(state="failed")

    refused = reopen(client, tenant_a, first)
    page = client.get(refused["Location"]).content.decode()

    assert refused["Location"] == reverse("outbox_intent", args=[tenant_a.slug, first.pk])
    assert f"open send #{second.pk} and re-approve from there" in page
    draft = Draft.objects.get(pk=first.draft_id)
    assert (draft.status, draft.current_version) == ("approved", 2)
    assert reopen(client, tenant_a, second).status_code == 302
    assert Draft.objects.get(pk=first.draft_id).current_version == 3


def test_approving_from_a_page_opened_before_a_reopen_says_who_put_it_back_and_why_to_look(
    tenant_a, mailbox_a, make_intent, admin_a, member_of, signed_in
):
    """A page loaded while version 1 waited for approval: meanwhile it was approved, its send
    failed, and a colleague put it back in review as version 2. "Changed since you opened it",
    over no difference, named neither the failed send nor the colleague."""
    intent = make_intent(mailbox_a, state="failed", last_error_code="unprocessable")
    seen = DraftVersion.objects.get(draft_id=intent.draft_id, number=1)
    cara = member_of(tenant_a, "approver", user__full_name="Cara Lind").user
    reopen(signed_in(cara), tenant_a, intent, reason="the address is fixed now")
    client = signed_in(admin_a.user)

    refused = client.post(
        reverse("draft_approve", args=[tenant_a.slug, intent.draft_id]),
        {"version": seen.number, "content_hash": seen.content_hash},
    )

    body = refused.content.decode()
    assert refused.status_code == 409
    assert "Cara Lind put version 1 back in review at " in body
    assert "after its send did not go out: version 2 is the same text." in body
    assert SendIntent.objects.filter(draft_id=intent.draft_id).count() == 1


def test_rejecting_from_a_page_opened_before_a_reopen_says_who_put_it_back(
    tenant_a, mailbox_a, make_intent, admin_a, member_of, signed_in
):
    intent = make_intent(mailbox_a, state="failed", last_error_code="unprocessable")
    seen = DraftVersion.objects.get(draft_id=intent.draft_id, number=1)
    cara = member_of(tenant_a, "approver", user__full_name="Cara Lind").user
    reopen(signed_in(cara), tenant_a, intent, reason="the address is fixed now")
    client = signed_in(admin_a.user)

    refused = client.post(
        reverse("draft_reject", args=[tenant_a.slug, intent.draft_id]),
        {"version": seen.number, "reason": "Not needed any more"},
    )

    body = refused.content.decode()
    assert refused.status_code == 409
    assert "Cara Lind put version 1 back in review at " in body
    assert "after its send did not go out: version 2 is the same text." in body
    assert Draft.objects.get(pk=intent.draft_id).status == "pending"
