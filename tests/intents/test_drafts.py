from datetime import timedelta

import pytest
from django.utils import timezone, translation
from django_q.models import OrmQ

from intents import errors, services
from intents.hashing import content_hash, version_hash
from intents.models import Draft, DraftVersion, IntentEvent, SendIntent, Suppression
from mailboxes.models import Mailbox
from tenants.models import AgentToken
from tenants.tokens import token_revoke
from tests.factories import make_local_mailbox

pytestmark = pytest.mark.django_db


def make_token(tenant, name="agent", **kwargs):
    return AgentToken.objects.create(
        tenant=tenant,
        name=name,
        prefix=f"p{tenant.pk}{name}"[:16],
        digest="0" * 64,
        scopes=["drafts:write"],
        **{"all_mailboxes": True, **kwargs},
    )


def approve_current(draft, actor):
    draft.refresh_from_db()
    version = draft.versions.get(number=draft.current_version)
    return services.draft_approve(
        tenant=draft.tenant,
        draft_id=draft.pk,
        version=version.number,
        content_hash=version.content_hash,
        actor=actor,
    )


# --- draft_create --------------------------------------------------------------------------------


def test_create_normalises_and_hashes(new_draft, local_mailbox):
    draft = new_draft(
        to=["Customer@Example.com"],
        cc=["Boss@Example.com"],
        bcc=[" audit@example.com "],
    )
    version = draft.versions.get()
    assert version.number == 1
    assert version.to == ["customer@example.com"]
    assert version.cc == ["boss@example.com"]
    assert version.bcc == ["audit@example.com"]
    assert version.content_hash == content_hash(
        mailbox_id=local_mailbox.pk,
        to=["customer@example.com"],
        cc=["boss@example.com"],
        bcc=["audit@example.com"],
        subject="Your refund",
        text="We refunded your order.",
        html="",
        in_reply_to="",
    )
    assert version_hash(version) == version.content_hash
    assert draft.status == Draft.Status.PENDING


@pytest.mark.parametrize(
    ("lists", "field", "message"),
    [
        (
            {"to": ["Customer@Example.com", "customer@example.com"]},
            "to",
            "customer@example.com in to is the same address as Customer@Example.com in to.",
        ),
        (
            {"to": ["customer@example.com"], "cc": ["boss@example.com", "customer@example.com"]},
            "cc",
            "customer@example.com is in both to and cc.",
        ),
        (
            {"to": ["customer@example.com", "customer@example.com"]},
            "to",
            "customer@example.com is in to twice.",
        ),
    ],
)
def test_create_refuses_a_recipient_named_twice_and_writes_nothing(
    new_draft, lists, field, message
):
    """Keeping one of them (as it did) changed the recipients behind the author's back."""
    with translation.override("en"), pytest.raises(errors.RecipientRefused) as refused:
        new_draft(**lists)

    assert (refused.value.code, refused.value.field) == ("duplicate_recipient", field)
    assert refused.value.message == f"{message} Name each recipient once across to, cc and bcc."
    assert Draft.objects.count() == 0
    assert IntentEvent.objects.count() == 0


def test_create_sets_review_deadline_from_tenant_policy(tenant_a, new_draft):
    tenant_a.review_deadline_hours = 5
    tenant_a.save(update_fields=["review_deadline_hours"])
    draft = new_draft()
    draft.refresh_from_db()
    assert draft.review_deadline - draft.created_at == pytest.approx(
        timedelta(hours=5), abs=timedelta(seconds=2)
    )


def test_create_journals(new_draft, approver):
    draft = new_draft()
    event = IntentEvent.objects.get(draft=draft)
    assert (event.action, event.to_state, event.actor_user) == (
        "draft.created",
        "pending",
        approver,
    )
    assert event.data["content_hash"] == draft.versions.get().content_hash


def test_create_by_agent_token(tenant_a, local_mailbox):
    token = make_token(tenant_a)
    draft = services.draft_create(
        tenant=tenant_a,
        mailbox=local_mailbox,
        to=["a@example.com"],
        subject="Hi",
        text="Hello",
        agent_token=token,
        provenance={"model": "m1"},
    )
    version = draft.versions.get()
    assert (version.author_kind, version.author_token) == ("agent", token)
    assert draft.agent_token == token
    assert draft.provenance == {"model": "m1"}


@pytest.mark.parametrize(
    ("overrides", "code", "field"),
    [
        ({"to": []}, "no_recipients", "to"),
        ({"to": ["not-an-address"]}, "recipient_invalid", "to"),
        ({"cc": ["also bad@"]}, "recipient_invalid", "cc"),
        ({"subject": "  "}, "subject_required", "subject"),
        ({"subject": "two\nlines"}, "subject_invalid", "subject"),
        ({"text": "", "html": ""}, "body_required", "text"),
        ({"priority": 1000}, "priority_invalid", "priority"),
        ({"provenance": ["x"]}, "provenance_invalid", "provenance"),
    ],
)
def test_create_refuses_bad_input_and_writes_nothing(new_draft, overrides, code, field):
    with pytest.raises(errors.InvalidInput) as caught:
        new_draft(**overrides)
    assert (caught.value.code, caught.value.field) == (code, field)
    assert Draft.objects.count() == 0
    assert IntentEvent.objects.count() == 0


def test_create_names_the_invalid_address(new_draft):
    with pytest.raises(errors.RecipientRefused) as caught:
        new_draft(to=["ok@example.com", "broken@@example.com"])
    assert caught.value.address == "broken@@example.com"
    assert "broken@@example.com" in caught.value.message


def test_create_refuses_recipient_outside_mailbox_policy(tenant_a, new_draft, local_mailbox):
    local_mailbox.policy_mode = Mailbox.PolicyMode.RESTRICTED
    local_mailbox.allowed_domains = ["customer.example"]
    local_mailbox.save(update_fields=["policy_mode", "allowed_domains"])
    with pytest.raises(errors.RecipientRefused) as caught:
        new_draft(to=["a@customer.example", "b@elsewhere.example"])
    assert caught.value.code == "recipient_not_allowed"
    assert caught.value.address == "b@elsewhere.example"
    assert Draft.objects.count() == 0


def test_create_refuses_suppressed_recipient(tenant_a, new_draft):
    Suppression.objects.create(tenant=tenant_a, address="gone@example.com", reason="bounced")
    with pytest.raises(errors.RecipientRefused) as caught:
        new_draft(to=["Gone@Example.com"])
    assert caught.value.code == "recipient_suppressed"
    assert caught.value.address == "gone@example.com"


def test_suppression_of_another_tenant_does_not_apply(tenant_b, new_draft):
    Suppression.objects.create(tenant=tenant_b, address="gone@example.com", reason="bounced")
    assert new_draft(to=["gone@example.com"]).status == "pending"


def test_create_refuses_mailbox_of_another_tenant(tenant_a, tenant_b, approver):
    foreign = make_local_mailbox(tenant_b)
    with pytest.raises(errors.NotFound) as caught:
        services.draft_create(
            tenant=tenant_a,
            mailbox=foreign.pk,
            to=["a@example.com"],
            subject="Hi",
            text="x",
            actor_user=approver,
        )
    assert caught.value.code == "mailbox_not_found"
    assert Draft.objects.count() == 0


def test_missing_and_foreign_mailbox_get_the_same_error(tenant_a, tenant_b, approver):
    foreign = make_local_mailbox(tenant_b)
    messages = []
    for mailbox_id in (foreign.pk, foreign.pk + 1000):
        with pytest.raises(errors.NotFound) as caught:
            services.draft_create(
                tenant=tenant_a,
                mailbox=mailbox_id,
                to=["a@example.com"],
                subject="Hi",
                text="x",
                actor_user=approver,
            )
        messages.append(caught.value.as_dict())
    assert messages[0] == messages[1]


def test_create_refuses_inactive_mailbox(new_draft, local_mailbox):
    Mailbox.objects.filter(pk=local_mailbox.pk).update(status=Mailbox.Status.DISABLED)
    with pytest.raises(errors.MailboxInactive):
        new_draft()


def test_create_refuses_suspended_tenant(tenant_a, new_draft):
    tenant_a.status = "suspended"
    tenant_a.save(update_fields=["status"])
    with pytest.raises(errors.TenantInactive):
        new_draft()


def test_create_refuses_revoked_token_and_foreign_token(tenant_a, tenant_b, local_mailbox):
    revoked = make_token(tenant_a, revoked_at=timezone.now())
    foreign = make_token(tenant_b, name="other")
    for token in (revoked, foreign):
        with pytest.raises(errors.NoRight):
            services.draft_create(
                tenant=tenant_a,
                mailbox=local_mailbox,
                to=["a@example.com"],
                subject="Hi",
                text="x",
                agent_token=token,
            )
    assert Draft.objects.count() == 0


@pytest.mark.parametrize("write", ["create", "revise", "withdraw"])
def test_a_token_revoked_after_the_request_read_it_writes_nothing(tenant_a, local_mailbox, write):
    """Found by an outside probe: the token is read once, when the request is authenticated, and
    the write trusted that copy; a revocation committed in between must stop the write."""
    token = make_token(tenant_a)
    content = {"to": ["a@example.com"], "subject": "Hi", "text": "x"}
    draft = services.draft_create(
        tenant=tenant_a, mailbox=local_mailbox, agent_token=token, **content
    )
    token_revoke(tenant=tenant_a, token_id=token.pk, actor=None)  # `token` is the request's copy
    writes = {
        "create": lambda: services.draft_create(
            tenant=tenant_a, mailbox=local_mailbox, agent_token=token, **content
        ),
        "revise": lambda: services.draft_add_version(
            tenant=tenant_a, draft_id=draft.pk, cc=[], bcc=[], html="", agent_token=token, **content
        ),
        "withdraw": lambda: services.draft_withdraw(
            tenant=tenant_a, draft_id=draft.pk, agent_token=token
        ),
    }

    with pytest.raises(errors.TokenRevoked) as caught:
        writes[write]()

    assert (caught.value.status, caught.value.code) == (401, "token_revoked")
    draft.refresh_from_db()
    assert (Draft.objects.count(), draft.current_version, draft.status) == (1, 1, "pending")


def test_token_restricted_to_other_mailbox_sees_not_found(tenant_a, local_mailbox):
    other = make_local_mailbox(tenant_a, username="sales")
    token = make_token(tenant_a, all_mailboxes=False)
    token.mailboxes.add(other)
    with pytest.raises(errors.NotFound):
        services.draft_create(
            tenant=tenant_a,
            mailbox=local_mailbox,
            to=["a@example.com"],
            subject="Hi",
            text="x",
            agent_token=token,
        )


# --- draft_add_version ---------------------------------------------------------------------------


def test_add_version_bumps_number_and_hash(tenant_a, new_draft, approver):
    draft = new_draft()
    version = services.draft_add_version(
        tenant=tenant_a,
        draft_id=draft.pk,
        to=["customer@example.com"],
        cc=[],
        bcc=[],
        subject="Your refund",
        text="We refunded your order today.",
        html="",
        actor_user=approver,
    )
    draft.refresh_from_db()
    assert (version.number, draft.current_version) == (2, 2)
    assert version.content_hash != draft.versions.get(number=1).content_hash
    assert IntentEvent.objects.filter(draft=draft, action="draft.version_added").count() == 1


def test_add_version_only_while_pending(tenant_a, new_draft, approver):
    draft = new_draft()
    approve_current(draft, approver)
    with pytest.raises(errors.NotPending):
        services.draft_add_version(
            tenant=tenant_a,
            draft_id=draft.pk,
            to=["x@example.com"],
            cc=[],
            bcc=[],
            subject="s",
            text="t",
            html="",
            actor_user=approver,
        )
    assert DraftVersion.objects.filter(draft=draft).count() == 1


# --- draft_approve -------------------------------------------------------------------------------


def test_approve_creates_one_queued_intent_with_tenant_key(
    tenant_a, new_draft, approver, django_capture_on_commit_callbacks
):
    draft = new_draft()
    with django_capture_on_commit_callbacks(execute=True) as callbacks:
        intent = approve_current(draft, approver)
    draft.refresh_from_db()
    version = draft.versions.get()
    assert draft.status == Draft.Status.APPROVED
    assert draft.decided_by == approver
    assert intent.state == SendIntent.State.QUEUED
    assert intent.idempotency_key.startswith(f"cs-{tenant_a.pk}-")
    assert len(intent.idempotency_key) == len(f"cs-{tenant_a.pk}-") + 32
    assert intent.content_hash == version.content_hash
    assert intent.recipients == {"to": ["customer@example.com"], "cc": [], "bcc": []}
    assert intent.draft_version == version
    assert intent.next_attempt_at is not None
    assert len(callbacks) == 1
    assert OrmQ.objects.count() == 1
    actions = list(
        IntentEvent.objects.filter(draft=draft).order_by("id").values_list("action", flat=True)
    )
    assert actions == ["draft.created", "draft.approved", "intent.created"]


def test_approve_refuses_stale_version(tenant_a, new_draft, approver):
    draft = new_draft()
    seen = draft.versions.get()
    services.draft_add_version(
        tenant=tenant_a,
        draft_id=draft.pk,
        to=["someone.else@example.com"],
        cc=[],
        bcc=[],
        subject="Your refund",
        text="We refunded your order.",
        html="",
        actor_user=approver,
    )
    with pytest.raises(errors.StaleVersion) as caught:
        services.draft_approve(
            tenant=tenant_a,
            draft_id=draft.pk,
            version=seen.number,
            content_hash=seen.content_hash,
            actor=approver,
        )
    assert caught.value.code == "stale_version"
    assert SendIntent.objects.count() == 0
    draft.refresh_from_db()
    assert draft.status == "pending"


def test_approve_refuses_wrong_hash_for_current_version(tenant_a, new_draft, approver):
    draft = new_draft()
    with pytest.raises(errors.StaleVersion):
        services.draft_approve(
            tenant=tenant_a, draft_id=draft.pk, version=1, content_hash="f" * 64, actor=approver
        )
    assert SendIntent.objects.count() == 0


def test_viewer_cannot_approve(tenant_a, new_draft, member_of):
    viewer = member_of(tenant_a, "viewer").user
    with pytest.raises(errors.NoRight):
        approve_current(new_draft(), viewer)
    assert SendIntent.objects.count() == 0


def test_inactive_member_cannot_approve(tenant_a, new_draft, member_of):
    membership = member_of(tenant_a, "approver")
    draft = new_draft()
    membership.is_active = False
    membership.save(update_fields=["is_active"])
    with pytest.raises(errors.NoRight):
        approve_current(draft, membership.user)


def test_per_mailbox_right(tenant_a, new_draft, member_of, local_mailbox):
    limited = member_of(tenant_a, "approver", approve_all_mailboxes=False)
    draft = new_draft()
    with pytest.raises(errors.NoRight):
        approve_current(draft, limited.user)
    limited.approve_mailboxes.add(local_mailbox)
    assert approve_current(draft, limited.user).state == "queued"


def test_member_of_other_tenant_cannot_approve(tenant_b, new_draft, member_of):
    outsider = member_of(tenant_b, "admin").user
    with pytest.raises(errors.NoRight):
        approve_current(new_draft(), outsider)


def test_draft_of_other_tenant_is_not_found(tenant_a, tenant_b, new_draft, member_of):
    draft = new_draft()
    admin_b = member_of(tenant_b, "admin").user
    version = draft.versions.get()
    with pytest.raises(errors.NotFound):
        services.draft_approve(
            tenant=tenant_b,
            draft_id=draft.pk,
            version=1,
            content_hash=version.content_hash,
            actor=admin_b,
        )
    assert SendIntent.objects.count() == 0


def test_second_approver_required_when_policy_on_and_approver_edited(
    tenant_a, new_draft, approver, member_of
):
    tenant_a.second_approver_on_edit = True
    tenant_a.save(update_fields=["second_approver_on_edit"])
    draft = new_draft()
    with pytest.raises(errors.SecondApproverRequired):
        approve_current(draft, approver)
    other = member_of(tenant_a, "approver").user
    assert approve_current(draft, other).approver == other


def test_approve_rechecks_recipients(tenant_a, new_draft, approver):
    draft = new_draft()
    Suppression.objects.create(tenant=tenant_a, address="customer@example.com", reason="bounced")
    with pytest.raises(errors.RecipientRefused) as caught:
        approve_current(draft, approver)
    assert caught.value.code == "recipient_suppressed"
    assert SendIntent.objects.count() == 0


def test_approve_refuses_a_sub_address_of_a_suppressed_address(tenant_a, new_draft, approver):
    draft = new_draft(to=["ana+billing@example.com"])
    Suppression.objects.create(tenant=tenant_a, address="ana@example.com", reason="complained")

    with pytest.raises(errors.RecipientRefused) as caught:
        approve_current(draft, approver)

    assert caught.value.code == "recipient_suppressed"
    assert caught.value.address == "ana+billing@example.com"
    assert caught.value.message == (
        "ana+billing@example.com is on this tenant's suppression list as ana@example.com "
        "(complained): a sub-address reaches the same mailbox"
    )
    assert SendIntent.objects.count() == 0


def test_approve_allows_the_base_and_other_sub_addresses_of_a_suppressed_sub_address(
    tenant_a, new_draft, approver
):
    draft = new_draft(to=["ana@example.com"], cc=["ana+other@example.com"])
    Suppression.objects.create(tenant=tenant_a, address="ana+news@example.com", reason="bounced")

    assert approve_current(draft, approver).recipients["cc"] == ["ana+other@example.com"]


def test_approve_refuses_suspended_tenant_and_disabled_mailbox(
    tenant_a, new_draft, approver, local_mailbox
):
    draft = new_draft()
    Mailbox.objects.filter(pk=local_mailbox.pk).update(status="disabled")
    with pytest.raises(errors.MailboxInactive):
        approve_current(draft, approver)
    Mailbox.objects.filter(pk=local_mailbox.pk).update(status="active")
    tenant_a.status = "suspended"
    tenant_a.save(update_fields=["status"])
    with pytest.raises(errors.TenantInactive):
        approve_current(draft, approver)
    assert SendIntent.objects.count() == 0


def test_second_approval_is_refused(new_draft, approver):
    draft = new_draft()
    approve_current(draft, approver)
    with pytest.raises(errors.NotPending):
        approve_current(draft, approver)
    assert SendIntent.objects.count() == 1


def test_approve_refuses_after_review_deadline(new_draft, approver):
    draft = new_draft()
    Draft.objects.filter(pk=draft.pk).update(review_deadline=timezone.now() - timedelta(minutes=1))
    with pytest.raises(errors.NotPending) as caught:
        approve_current(draft, approver)
    assert caught.value.code == "review_expired"


# --- reject / withdraw / expire ------------------------------------------------------------------


def test_reject_needs_reason_and_right(tenant_a, new_draft, approver, member_of):
    draft = new_draft()
    with pytest.raises(errors.InvalidInput):
        services.draft_reject(tenant=tenant_a, draft_id=draft.pk, reason=" ", actor=approver)
    viewer = member_of(tenant_a, "viewer").user
    with pytest.raises(errors.NoRight):
        services.draft_reject(tenant=tenant_a, draft_id=draft.pk, reason="no", actor=viewer)
    rejected = services.draft_reject(
        tenant=tenant_a, draft_id=draft.pk, reason="Wrong tone", actor=approver
    )
    assert (rejected.status, rejected.reject_reason) == ("rejected", "Wrong tone")
    with pytest.raises(errors.NotPending):
        approve_current(draft, approver)


def test_a_reason_posted_with_crlf_line_breaks_is_counted_and_kept_with_lf(
    tenant_a, new_draft, approver
):
    """The reject box (maxlength 2000) counts a line break as one character; a browser posts it
    as CRLF."""
    lines = ["y" * 49] * 40
    posted = "\r\n".join(lines[:-1]) + "\r" + lines[-1]
    assert len(posted) > 2000
    rejected = services.draft_reject(
        tenant=tenant_a, draft_id=new_draft().pk, reason=posted, actor=approver
    )
    assert rejected.reject_reason == "\n".join(lines)


@pytest.mark.parametrize("reason", ["bad\x00", "bad \ud800"], ids=["nul", "surrogate"])
def test_a_reason_postgresql_cannot_store_is_refused_and_the_draft_stays(
    tenant_a, new_draft, approver, reason
):
    draft = new_draft()

    with pytest.raises(errors.InvalidInput) as refused:
        services.draft_reject(tenant=tenant_a, draft_id=draft.pk, reason=reason, actor=approver)

    assert (refused.value.code, refused.value.field) == ("reason_unstorable", "reason")
    draft.refresh_from_db()
    assert draft.status == "pending"


def test_withdraw_by_agent(tenant_a, local_mailbox):
    token = make_token(tenant_a)
    draft = services.draft_create(
        tenant=tenant_a,
        mailbox=local_mailbox,
        to=["a@example.com"],
        subject="Hi",
        text="x",
        agent_token=token,
    )
    withdrawn = services.draft_withdraw(tenant=tenant_a, draft_id=draft.pk, agent_token=token)
    assert withdrawn.status == "withdrawn"
    event = IntentEvent.objects.get(draft=draft, action="draft.withdrawn")
    assert (event.actor_kind, event.actor_token) == ("agent", token)


def test_withdraw_after_approval_is_refused(tenant_a, new_draft, approver):
    draft = new_draft()
    approve_current(draft, approver)
    with pytest.raises(errors.NotPending):
        services.draft_withdraw(tenant=tenant_a, draft_id=draft.pk, actor_user=approver)


def test_expire_due_only_touches_pending_past_deadline(new_draft, approver):
    due = new_draft()
    fresh = new_draft()
    approved = new_draft()
    approve_current(approved, approver)
    past = timezone.now() - timedelta(minutes=1)
    Draft.objects.filter(pk__in=[due.pk, approved.pk]).update(review_deadline=past)
    assert services.draft_expire_due() == 1
    assert services.draft_expire_due() == 0
    statuses = dict(Draft.objects.values_list("pk", "status"))
    assert statuses == {due.pk: "expired", fresh.pk: "pending", approved.pk: "approved"}
    assert IntentEvent.objects.filter(draft=due, action="draft.expired").count() == 1


def test_expire_due_also_ends_pending_drafts_past_their_send_by_time(new_draft, approver):
    """No approval could send them any more (it is refused past not_after): they leave the
    queue as expired, with the reason, instead of waiting there for a person forever."""
    late = new_draft()
    later = new_draft()
    approved = new_draft()
    approve_current(approved, approver)
    past = timezone.now() - timedelta(minutes=1)
    Draft.objects.filter(pk__in=[late.pk, approved.pk]).update(not_after=past)
    Draft.objects.filter(pk=later.pk).update(not_after=timezone.now() + timedelta(hours=1))

    assert services.draft_expire_due() == 1

    statuses = dict(Draft.objects.values_list("pk", "status"))
    assert statuses == {late.pk: "expired", later.pk: "pending", approved.pk: "approved"}
    event = IntentEvent.objects.get(draft=late, action="draft.expired")
    assert event.reason == "send-by time (not_after) passed"


@pytest.mark.parametrize(
    ("field", "lists"),
    [
        ("to", {"to": ["customer@example.com", "OWN"]}),
        ("cc", {"to": ["customer@example.com"], "cc": ["OWN"]}),
        ("bcc", {"to": ["customer@example.com"], "bcc": ["OWN"]}),
    ],
)
def test_create_refuses_the_sending_mailboxs_own_address(new_draft, local_mailbox, field, lists):
    """AgentMail delivers a reply to its own inbox back into it, where the agent that wrote it
    may answer it again: a mail loop. No reply needs to: the sent message is in the inbox."""
    own = local_mailbox.address.upper()
    with pytest.raises(errors.RecipientRefused) as caught:
        new_draft(**{k: [own if a == "OWN" else a for a in v] for k, v in lists.items()})
    assert (caught.value.code, caught.value.field) == ("recipient_own_mailbox", field)
    assert caught.value.address == local_mailbox.address.lower()
    assert "back into its own inbox" in caught.value.message
    assert Draft.objects.count() == 0
    assert IntentEvent.objects.count() == 0
