"""The one-time id of the admin forms whose answer shows a secret once (tenants.once_forms): the
same form posted twice (a second click while the first answer is on its way; the browser shows
the second answer) creates one thing, and the second answer says what the first click made, by
name and prefix, never the secret. Found by an outside probe: the second answer was "A token with
this name already exists." and the token's secret was shown to nobody."""

from __future__ import annotations

import logging
import re

import pytest
from django.core.cache import cache

from intents.models import AgentEventEndpoint
from intents.services.event_endpoints import endpoint_create
from tenants.models import AgentToken, AuditEvent, FormReceipt
from tenants.once_forms import AlreadySubmitted
from tenants.tokens import token_create
from tests.intents.helpers import run_concurrently

TOKENS = "/t/tenant-a/admin/tokens/"
EVENTS = "/t/tenant-a/admin/agent-events/"


@pytest.fixture(autouse=True)
def _fresh_rate_limits():
    cache.clear()
    yield
    cache.clear()


def hidden_fields(page: bytes) -> dict:
    """The hidden fields of the page's form, as the browser posts them (no CSRF token)."""
    fields = re.findall(r'<input type="hidden" name="([^"]+)" value="([^"]*)"', page.decode())
    return {name: value for name, value in fields if name != "csrfmiddlewaretoken"}


def token_form(client) -> dict:
    form_id = hidden_fields(client.get(TOKENS).content)["form_id"]
    return {"name": "support-bot", "scopes": ["drafts:read"], "form_id": form_id}


@pytest.mark.django_db
def test_the_token_form_posted_twice_names_the_token_the_first_post_made(
    tenant_a, member_of, signed_in, caplog
):
    client = signed_in(member_of(tenant_a, "admin").user)
    form = token_form(client)

    with caplog.at_level(logging.DEBUG):
        first, second = (client.post(f"{TOKENS}new/", form) for _ in range(2))

    token = AgentToken.objects.get()
    plaintext = re.search(r'value="(cs_[^"]+)"', first.content.decode()).group(1)
    page = second.content.decode()
    assert (first.status_code, second.status_code) == (200, 409)
    assert "This token was already created" in page
    assert f"cs_{token.prefix}_…" in page
    assert f'href="{TOKENS}{token.pk}/revoke/"' in page
    assert plaintext not in page
    assert plaintext.split("_", 2)[2] not in caplog.text
    assert AuditEvent.objects.filter(action="token.created").count() == 1


@pytest.mark.django_db
def test_a_refused_post_leaves_the_form_id_for_the_corrected_one(tenant_a, member_of, signed_in):
    admin = member_of(tenant_a, "admin").user
    token_create(tenant=tenant_a, name="support-bot", scopes=["drafts:read"], actor=admin)
    client = signed_in(admin)
    form = token_form(client)

    refused = client.post(f"{TOKENS}new/", form)
    corrected = client.post(f"{TOKENS}new/", {**form, "name": "support-bot-2"})

    assert refused.status_code == 422
    assert f'name="form_id" value="{form["form_id"]}"' in refused.content.decode()
    assert corrected.status_code == 200
    assert AgentToken.objects.filter(name="support-bot-2").count() == 1


@pytest.mark.django_db
def test_each_showing_of_the_form_has_its_own_id(tenant_a, member_of, signed_in):
    client = signed_in(member_of(tenant_a, "admin").user)

    answers = [
        client.post(f"{TOKENS}new/", {**token_form(client), "name": f"bot-{i}"}) for i in (1, 2)
    ]

    assert [a.status_code for a in answers] == [200, 200]
    assert AgentToken.objects.count() == 2


@pytest.mark.django_db
def test_another_tenants_form_id_is_not_this_tenants(tenant_a, tenant_b, member_of):
    form_id = "x" * 24
    token_create(
        tenant=tenant_a,
        name="bot",
        scopes=["drafts:read"],
        actor=member_of(tenant_a, "admin").user,
        form_id=form_id,
    )

    token, _plaintext = token_create(
        tenant=tenant_b,
        name="bot",
        scopes=["drafts:read"],
        actor=member_of(tenant_b, "admin").user,
        form_id=form_id,
    )

    assert token.tenant_id == tenant_b.pk
    assert FormReceipt.objects.filter(form_id=form_id).count() == 2


@pytest.mark.django_db(transaction=True)
def test_ten_posts_of_one_form_at_once_make_one_token(tenant_a, member_of):
    admin = member_of(tenant_a, "admin").user

    def create(i):
        return token_create(
            tenant=tenant_a,
            name="support-bot",
            scopes=["drafts:read"],
            actor=admin,
            form_id="one-form-id-for-all-ten",
        )

    results = run_concurrently(create, 10)

    token = AgentToken.objects.get()
    refused = [r for r in results if isinstance(r, AlreadySubmitted)]
    assert len(refused) == 9
    assert {r.receipt.object_id for r in refused} == {str(token.pk)}


@pytest.mark.django_db
def test_the_endpoint_form_posted_twice_names_the_endpoint_the_first_post_made(
    tenant_a, member_of, signed_in
):
    client = signed_in(member_of(tenant_a, "admin").user)
    form_id = hidden_fields(client.get(EVENTS).content)["form_id"]
    form = {
        "url": "https://agent.example.com/hooks",
        "event_types": ["draft.approved"],
        "form_id": form_id,
    }

    first, second = (client.post(f"{EVENTS}new/", form) for _ in range(2))

    endpoint = AgentEventEndpoint.objects.get()
    secret = re.search(r'id="endpoint-secret"[^>]*value="([^"]+)"', first.content.decode())
    page = second.content.decode()
    assert (first.status_code, second.status_code) == (200, 409)
    assert "This endpoint was already added" in page
    assert "https://agent.example.com/hooks" in page
    assert f'href="{EVENTS}{endpoint.pk}/rotate/"' in page
    assert secret.group(1) not in page


@pytest.mark.django_db
def test_the_rotation_posted_twice_says_the_first_post_rotated(tenant_a, member_of, signed_in):
    admin = member_of(tenant_a, "admin").user
    endpoint, _secret = endpoint_create(
        tenant=tenant_a, url="https://a.example.com/", event_types=["draft.approved"], actor=admin
    )
    client = signed_in(admin)
    answer = hidden_fields(client.get(f"{EVENTS}{endpoint.pk}/rotate/").content)

    first, second = (client.post(f"{EVENTS}{endpoint.pk}/rotate/", answer) for _ in range(2))

    secret = re.search(r'id="endpoint-secret"[^>]*value="([^"]+)"', first.content.decode())
    page = second.content.decode()
    assert (first.status_code, second.status_code) == (200, 409)
    assert "This secret was already rotated" in page
    assert "rotated since you opened this page" not in page
    assert secret.group(1) not in page
    assert AuditEvent.objects.filter(action="agent_events.secret_rotated").count() == 1


@pytest.mark.django_db
def test_the_daily_retention_forgets_receipts_older_than_a_day(tenant_a, member_of, caplog):
    """Found by a probe: a receipt only answers a second click (seconds, at most a day when a
    form is posted again from the browser's history), and none was ever deleted: one row per
    token, endpoint, rotation and two-factor setup, for the life of the tenant."""
    from datetime import timedelta

    from django.utils import timezone

    from intents import tasks

    admin = member_of(tenant_a, "admin").user
    for form_id in ("an-old-form-id-0001", "a-fresh-form-id-0002"):
        token_create(
            tenant=tenant_a, name=form_id, scopes=["drafts:read"], actor=admin, form_id=form_id
        )
    FormReceipt.objects.filter(form_id="an-old-form-id-0001").update(
        created_at=timezone.now() - timedelta(days=1, minutes=1)
    )

    with caplog.at_level(logging.INFO, logger="tenants.once_forms"):
        tasks.retention_purge()

    assert list(FormReceipt.objects.values_list("form_id", flat=True)) == ["a-fresh-form-id-0002"]
    purged = [r for r in caplog.records if r.name == "tenants.once_forms"]
    assert [(r.msg, r.deleted) for r in purged] == [("tenants.form_receipts.purged", 1)]


def test_a_form_id_another_form_used_is_not_taken_for_a_second_post_of_this_one(
    tenant_a, member_of, signed_in
):
    """Found by an outside probe: the token form's id posted with the endpoint form was refused
    as a second post of it, and the answer named as "added by your first click" the endpoint
    whose id happened to be the token's (its rotate button beside it), or said the endpoint was
    deleted since. Each form's id guards that form: another form's is no post of this one."""
    admin = member_of(tenant_a, "admin").user
    other, _secret = endpoint_create(
        tenant=tenant_a,
        url="https://other.example.com/",
        event_types=["draft.approved"],
        actor=admin,
    )
    client = signed_in(admin)
    form = token_form(client)
    client.post(f"{TOKENS}new/", form)
    token = AgentToken.objects.get()
    AgentEventEndpoint.objects.filter(pk=other.pk).update(id=token.pk)

    answer = client.post(
        f"{EVENTS}new/",
        {
            "url": "https://agent.example.com/hooks",
            "event_types": ["draft.approved"],
            "form_id": form["form_id"],
        },
    )

    assert answer.status_code == 200
    assert "https://other.example.com/" not in answer.content.decode()
    assert AgentEventEndpoint.objects.filter(url="https://agent.example.com/hooks").count() == 1
