"""A token's standing and mailbox restriction, read by the draft services themselves, in the
writing transaction, once the token's row is locked: they trusted the token object loaded when
the request began, whose ``all_mailboxes`` a restriction committed since no longer holds, and
checked the draft's state before the token. A token narrowed (or revoked) during a create, a
revision or a withdrawal wrote where it no longer may, or was told a lost draft's decision.
Real concurrent transactions, each thread on its own connection."""

from __future__ import annotations

import json

import pytest
from django.db import transaction
from django.test import Client

from intents import errors, services
from intents.attachments import Upload
from intents.models import ApiIdempotencyKey, Draft, DraftVersion, IntentEvent
from tenants.models import AgentToken
from tenants.tokens import token_authenticate, token_revoke
from tests.agent_api.conftest import draft_body
from tests.agent_api.test_probe_replay_scope import narrow
from tests.intents.helpers import blocked_on_a_lock, in_thread

pytestmark = pytest.mark.django_db(transaction=True)

REVISION = {"to": ["customer@example.com"], "subject": "v2", "text": "The second text."}
FILE = Upload("note.txt", "text/plain", b"attached words\n")


def _token(raw: str) -> AgentToken:
    """The token as a request loads it at its start."""
    return AgentToken.objects.get(pk=token_authenticate(raw).pk)


def _draft(tenant, mailbox, token) -> Draft:
    return services.draft_create(
        tenant=tenant,
        mailbox=mailbox,
        to=["customer@example.com"],
        subject="Hi",
        text="x",
        agent_token=token,
    )


def _refusal(fn) -> errors.DraftError:
    with pytest.raises(errors.DraftError) as refused:
        fn()
    return refused.value


def _revise(tenant, draft, token, **extra):
    return lambda: services.draft_add_version(
        tenant=tenant,
        draft_id=draft.pk,
        agent_token=token,
        **REVISION,
        cc=(),
        bcc=(),
        html="",
        **extra,
    )


def _withdraw(tenant, draft, token):
    return lambda: services.draft_withdraw(tenant=tenant, draft_id=draft.pk, agent_token=token)


def _code(refusal: errors.DraftError) -> tuple:
    return (refusal.status, refusal.code, getattr(refusal, "field", None))


@pytest.mark.parametrize("narrowed", ["other_mailbox", "all_to_other"])
def test_the_draft_services_refuse_a_draft_outside_the_tokens_scope_as_the_api_does(
    make_token, tenant_a, mailbox_a, mailbox_a2, narrowed
):
    """The token read when the request began (every mailbox, or mailbox_a) is the one the
    services are given; the restriction committed since is the one they must apply, with the
    API's own 404s: a mailbox named is ``mailbox_not_found``, a draft named is ``not_found``."""
    every = narrowed == "all_to_other"
    raw = make_token(tenant_a, mailboxes=() if every else (mailbox_a, mailbox_a2))
    token = _token(raw)
    draft = _draft(tenant_a, mailbox_a, token)
    narrow(raw, mailboxes=[mailbox_a2])

    created = _refusal(lambda: _draft(tenant_a, mailbox_a, token))
    revised = _refusal(_revise(tenant_a, draft, token))
    with_file = _refusal(_revise(tenant_a, draft, token, attachments=[FILE]))
    withdrawn = _refusal(_withdraw(tenant_a, draft, token))

    assert _code(created) == (404, "mailbox_not_found", "mailbox")
    assert [_code(r) for r in (revised, with_file, withdrawn)] == [(404, "not_found", None)] * 3
    assert [str(r) for r in (revised, with_file, withdrawn)] == ["No such draft."] * 3
    assert list(Draft.objects.values_list("pk", "status", "current_version")) == [
        (draft.pk, Draft.Status.PENDING, 1)
    ]
    assert DraftVersion.objects.count() == 1
    assert list(IntentEvent.objects.values_list("action", flat=True)) == ["draft.created"]


def test_a_decided_draft_in_a_lost_mailbox_is_404_not_its_decision(
    make_token, tenant_a, mailbox_a, mailbox_a2
):
    """The draft's state was checked before the token: a token that lost the mailbox was told
    the draft was withdrawn, and when, where the API answers a missing draft."""
    raw = make_token(tenant_a)
    token = _token(raw)
    draft = _draft(tenant_a, mailbox_a, token)
    _withdraw(tenant_a, draft, token)()
    narrow(raw, mailboxes=[mailbox_a2])

    revised = _refusal(_revise(tenant_a, draft, token))
    withdrawn = _refusal(_withdraw(tenant_a, draft, token))

    assert [_code(r) for r in (revised, withdrawn)] == [(404, "not_found", None)] * 2


def test_a_token_revoked_during_its_request_is_401_before_the_drafts_state(
    make_token, member_of, tenant_a, mailbox_a
):
    """Revoked after the request was authenticated: the token's refusal, as the API gives it to
    a revoked token, not the decision on a draft it may no longer read."""
    raw = make_token(tenant_a)
    token = _token(raw)
    draft = _draft(tenant_a, mailbox_a, token)
    _withdraw(tenant_a, draft, token)()
    token_revoke(tenant=tenant_a, token_id=token.pk, actor=member_of(tenant_a, "admin").user)

    revised = _refusal(_revise(tenant_a, draft, token))
    withdrawn = _refusal(_withdraw(tenant_a, draft, token))

    assert [_code(r) for r in (revised, withdrawn)] == [(401, "token_revoked", None)] * 2


def _post(path: str, raw: str, body: dict | None, key: str | None = None):
    headers = {"Authorization": f"Bearer {raw}"}
    if key is not None:
        headers["Idempotency-Key"] = key
    return lambda: Client().post(
        f"/api/v1{path}",
        data=json.dumps(body) if body is not None else "",
        content_type="application/json",
        headers=headers,
    )


def test_a_restriction_committed_while_a_revision_waits_for_the_draft_refuses_it(
    make_token, tenant_a, mailbox_a, mailbox_a2
):
    """The POST passed the API's scope check with the token of its start (every mailbox), then
    waited for the draft's row (a reviewer held it); the restriction committed during the wait."""
    raw = make_token(tenant_a)
    draft = _draft(tenant_a, mailbox_a, _token(raw))
    outcome: list = []

    with transaction.atomic():
        Draft.objects.select_for_update().filter(pk=draft.pk).values_list("pk").first()
        writer = in_thread(_post(f"/drafts/{draft.pk}/versions", raw, REVISION), outcome)
        assert blocked_on_a_lock(), "the revision never reached the draft's row"
        restricted: list = []
        in_thread(lambda: narrow(raw, mailboxes=[mailbox_a2]), restricted).join(30)
        assert restricted == [None], restricted
    writer.join(30)

    assert outcome[0].status_code == 404, outcome[0].content
    assert outcome[0].json()["code"] == "not_found"
    assert DraftVersion.objects.filter(draft=draft).count() == 1
    assert not IntentEvent.objects.filter(action="draft.version_added").exists()


def test_a_restriction_whose_commit_a_create_waited_for_at_the_token_refuses_it(
    make_token, tenant_a, mailbox_a, mailbox_a2
):
    """The restriction held the token's row while the create's standing read waited for it: the
    statement that waited reads other tables as of before its wait, so the restriction is read
    in a statement of its own once the lock is held."""
    raw = make_token(tenant_a, mailboxes=(mailbox_a, mailbox_a2))
    token = _token(raw)  # recent use: the request's authentication writes nothing to the row
    outcome: list = []

    with transaction.atomic():
        # FOR NO KEY UPDATE, the lock the restriction's UPDATE takes: the request's rows that name
        # the token (its key, its rate window) do not wait for it, its standing read does.
        locked = AgentToken.objects.select_for_update(no_key=True).get(pk=token.pk)
        writer = in_thread(_post("/drafts", raw, draft_body(mailbox_a), key="d-1"), outcome)
        assert blocked_on_a_lock(), "the create never reached the token's row"
        locked.all_mailboxes = False
        locked.save(update_fields=["all_mailboxes"])
        locked.mailboxes.set([mailbox_a2])
    writer.join(30)

    assert outcome[0].status_code == 404, outcome[0].content
    assert outcome[0].json()["code"] == "mailbox_not_found"
    assert not Draft.objects.exists()


def test_a_restriction_committed_while_a_replay_waits_for_its_key_refuses_the_replay(
    make_token, tenant_a, mailbox_a, mailbox_a2
):
    """The replay was authenticated with the token of its start (every mailbox), then waited
    for its key's row (the first request completing); the restriction committed meanwhile, and
    the stored answer is a draft of a mailbox the token lost."""
    raw = make_token(tenant_a)
    first = _post("/drafts", raw, draft_body(mailbox_a), key="d-1")()
    assert first.status_code == 201, first.content
    outcome: list = []

    with transaction.atomic():
        ApiIdempotencyKey.objects.select_for_update().filter(key="d-1").values_list("pk").first()
        replay = in_thread(_post("/drafts", raw, draft_body(mailbox_a), key="d-1"), outcome)
        assert blocked_on_a_lock(), "the replay never reached its key's row"
        restricted: list = []
        in_thread(lambda: narrow(raw, mailboxes=[mailbox_a2]), restricted).join(30)
        assert restricted == [None], restricted
    replay.join(30)

    assert outcome[0].status_code == 404, outcome[0].content
    assert outcome[0].json()["code"] == "mailbox_not_found"
    assert "Idempotent-Replayed" not in outcome[0]
