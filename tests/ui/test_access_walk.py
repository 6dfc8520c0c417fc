"""Walk every URL pattern under /t/<slug>/ as an outsider and as each role.

The expectation table must name every pattern: a new route fails this test until someone decides
who may open it.
"""

import pytest
from django.urls import URLPattern, URLResolver, get_resolver

from intents.attachments import Upload
from intents.models import (
    AgentEvent,
    AgentEventDelivery,
    AgentEventEndpoint,
    Broadcast,
    DraftAttachment,
    Suppression,
)
from intents.services.broadcasts import broadcast_create
from intents.services.event_endpoints import endpoint_create
from review.views.bodies import EMAIL_DOCUMENT_POLICY
from tenants import invitations
from tenants.models import AgentToken

pytestmark = pytest.mark.django_db

READ = {"viewer": 200, "approver": 200, "admin": 200}
ADMIN_PAGE = {"viewer": 403, "approver": 403, "admin": 200}
DECIDE_PAGE = {"viewer": 403, "approver": 200, "admin": 200}
# POST-only routes answer a GET with 405, after the role check.
POST_DECIDE = {"viewer": 403, "approver": 405, "admin": 405}
POST_ADMIN = {"viewer": 403, "approver": 403, "admin": 405}
POST_READ = {"viewer": 405, "approver": 405, "admin": 405}
# A form's POST URL that a reload may GET: it leads an admin back to the page with the form.
POST_ANY = {"viewer": 405, "approver": 405, "admin": 405}
BACK_TO_FORM_ADMIN = {"viewer": 403, "approver": 403, "admin": 302}

EXPECTED = {
    "tenant_home": READ,
    "queue_changes": READ,
    "nav_counts": READ,
    "bulk_approve": POST_DECIDE,
    "draft": READ,
    "draft_approve": POST_DECIDE,
    "draft_reject": POST_DECIDE,
    "draft_edit": DECIDE_PAGE,
    "draft_note_add": POST_DECIDE,
    "draft_presence": POST_READ,
    "draft_take": POST_DECIDE,
    "draft_release": POST_DECIDE,
    "draft_hand": POST_DECIDE,
    "attachment_download": READ,
    "attachment_preview": READ,
    "draft_version_html": READ,
    "draft_html_preview": POST_DECIDE,
    "broadcasts": READ,
    "broadcast": READ,
    "broadcast_recipients_csv": READ,
    "broadcast_sample_html": READ,
    "broadcast_new": DECIDE_PAGE,
    "broadcast_approve": POST_DECIDE,
    "broadcast_reject": POST_DECIDE,
    "broadcast_control": POST_DECIDE,
    "my_away": POST_ANY,
    "outbox": READ,
    "outbox_intent": READ,
    "intent_cancel": POST_DECIDE,
    "intent_undo": POST_DECIDE,
    "intent_resolve": POST_DECIDE,
    "intent_release": POST_DECIDE,
    "intent_reopen": POST_DECIDE,
    "attention": READ,
    "admin_home": ADMIN_PAGE,
    "admin_members": ADMIN_PAGE,
    "admin_member": ADMIN_PAGE,
    "admin_member_role": POST_ADMIN,
    "admin_member_rights": POST_ADMIN,
    # GET is the confirm page; its POST deactivates.
    "admin_member_deactivate": ADMIN_PAGE,
    "admin_member_away": POST_ADMIN,
    "admin_member_reactivate": POST_ADMIN,
    "admin_member_two_factor_reset": POST_ADMIN,
    "admin_invitation_revoke": POST_ADMIN,
    "admin_policies": ADMIN_PAGE,
    "admin_own_domains": BACK_TO_FORM_ADMIN,
    "admin_deadlines": POST_ADMIN,
    "admin_recipients": ADMIN_PAGE,
    "admin_suppressions": ADMIN_PAGE,
    "admin_suppression_add": POST_ADMIN,
    "admin_suppression_remove": POST_ADMIN,
    "admin_webhooks": ADMIN_PAGE,
    "admin_signin": ADMIN_PAGE,
    "admin_two_factor_policy": POST_ADMIN,
    "admin_sso_settings": POST_ADMIN,
    "admin_audit": ADMIN_PAGE,
    "admin_audit_csv": ADMIN_PAGE,
    "admin_analytics": ADMIN_PAGE,
    "admin_analytics_csv": ADMIN_PAGE,
    "token_list": ADMIN_PAGE,
    "token_new": BACK_TO_FORM_ADMIN,
    "token_revoke": ADMIN_PAGE,
    "agent_events": ADMIN_PAGE,
    "agent_events_new": BACK_TO_FORM_ADMIN,
    # GET is the confirm page; its POST rotates or deletes.
    "agent_events_rotate": ADMIN_PAGE,
    "agent_events_delete": ADMIN_PAGE,
    "agent_events_enable": POST_ADMIN,
    "agent_events_disable": POST_ADMIN,
    "agent_events_resend": POST_ADMIN,
    "mailbox_list": READ,
    "mailbox_create": ADMIN_PAGE,
    "mailbox_detail": READ,
    "mailbox_policy": POST_ADMIN,
    "mailbox_assignment": POST_ADMIN,
    "mailbox_status": POST_ADMIN,
    "mailbox_retry": POST_ADMIN,
    "mailbox_key_check": POST_ADMIN,
    "mailbox_key_replace": POST_ADMIN,
    "mailbox_inbox_recover": POST_ADMIN,
}


def event_delivery(tenant, admin):
    """An agent events endpoint of the tenant and one (delivered) delivery to it."""
    endpoint, _ = endpoint_create(
        tenant=tenant, url="https://a.example.com/", event_types=["draft.approved"], actor=admin
    )
    event = AgentEvent.objects.create(
        tenant=tenant, public_id=f"evt_walk{tenant.pk}", type="draft.approved", payload={}
    )
    delivery = AgentEventDelivery.objects.create(
        tenant=tenant, endpoint=endpoint, event=event, status="delivered"
    )
    return endpoint, delivery


# A one-pixel PNG: the draft's file has a preview, so the preview route answers 200 to a reader.
PNG = (
    b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR\x00\x00\x00\x01\x00\x00\x00\x01\x08\x06\x00\x00\x00\x1f"
    b"\x15\xc4\x89\x00\x00\x00\rIDATx\x9cc\xf8\xcf\xc0\xf0\x1f\x00\x05\x00\x01\xff\x89\x99=\x1d"
    b"\x00\x00\x00\x00IEND\xaeB`\x82"
)


def draft_with_file(make_draft, mailbox):
    draft = make_draft(mailbox, attachments=[Upload("label.png", "image/png", PNG)])
    return draft, DraftAttachment.objects.get(version__draft=draft)


def a_broadcast(tenant, mailbox) -> Broadcast:
    return broadcast_create(
        tenant=tenant,
        mailbox=mailbox,
        subject="Delay {{ n }}",
        text="Hello {{ n }}",
        recipients=[{"address": f"p{i}@example.com", "variables": {"n": i}} for i in range(2)],
    )


def tenant_patterns():
    """(name, route template) of every named pattern whose full route starts with t/<slug:slug>/."""
    found = []

    def walk(patterns, prefix):
        for p in patterns:
            if isinstance(p, URLResolver):
                walk(p.url_patterns, prefix + str(p.pattern))
            elif isinstance(p, URLPattern):
                route = prefix + str(p.pattern)
                if route.startswith("t/<slug:slug>/"):
                    found.append((p.name, route))

    walk(get_resolver().url_patterns, "")
    return found


def fill(route: str, values: dict) -> str:
    import re

    def sub(match):
        name = match.group(2)
        assert name in values, f"no test value for <{name}> in {route}; add one"
        return str(values[name])

    return "/" + re.sub(r"<(?:(\w+):)?(\w+)>", sub, route)


@pytest.fixture
def world(tenant_a, tenant_b, mailbox_a, mailbox_b, make_draft, make_intent, member_of):
    viewer = member_of(tenant_a, "viewer")
    approver = member_of(tenant_a, "approver")
    admin = member_of(tenant_a, "admin")
    outsider = member_of(tenant_b, "admin")
    draft, attachment = draft_with_file(make_draft, mailbox_a)
    intent = make_intent(mailbox_a, state="needs_attention")
    token = AgentToken.objects.create(
        tenant=tenant_a, name="walker", prefix="walk0001", digest="0" * 64, all_mailboxes=True
    )
    suppression = Suppression.objects.create(
        tenant=tenant_a, address="gone@example.com", reason="manual"
    )
    invitation, _ = invitations.invitation_create(
        tenant=tenant_a, email="invited@example.test", role="admin", actor=admin.user
    )
    b_invitation, _ = invitations.invitation_create(
        tenant=tenant_b, email="invited@example.test", role="admin", actor=outsider.user
    )
    endpoint, delivery = event_delivery(tenant_a, admin.user)
    values_a = {
        "slug": tenant_a.slug,
        "endpoint_id": endpoint.pk,
        "delivery_id": delivery.pk,
        "invitation_id": invitation.pk,
        "draft_id": draft.pk,
        "attachment_id": attachment.pk,
        "number": 1,
        "broadcast_id": a_broadcast(tenant_a, mailbox_a).pk,
        "action": "pause",
        "intent_id": intent.pk,
        "membership_id": viewer.pk,
        "suppression_id": suppression.pk,
        "mailbox_id": mailbox_a.pk,
        "token_id": token.pk,
    }
    b_draft, b_attachment = draft_with_file(make_draft, mailbox_b)
    b_token = AgentToken.objects.create(
        tenant=tenant_b, name="b", prefix="walk0002", digest="1" * 64
    )
    b_suppression = Suppression.objects.create(
        tenant=tenant_b, address="b@example.com", reason="manual"
    )
    b_endpoint, b_delivery = event_delivery(tenant_b, outsider.user)
    values_b_objects = {
        **values_a,
        "endpoint_id": b_endpoint.pk,
        "delivery_id": b_delivery.pk,
        "draft_id": b_draft.pk,
        "attachment_id": b_attachment.pk,
        "broadcast_id": a_broadcast(tenant_b, mailbox_b).pk,
        "intent_id": make_intent(mailbox_b, state="needs_attention").pk,
        "membership_id": outsider.pk,
        "suppression_id": b_suppression.pk,
        "mailbox_id": mailbox_b.pk,
        "token_id": b_token.pk,
        "invitation_id": b_invitation.pk,
    }
    return {
        "roles": {"viewer": viewer, "approver": approver, "admin": admin},
        "outsider": outsider,
        "values": values_a,
        "foreign_objects": values_b_objects,
    }


def test_every_tenant_pattern_is_classified():
    names = {name for name, _ in tenant_patterns()}
    assert names == set(EXPECTED), (
        f"unclassified: {sorted(names - set(EXPECTED))}; gone: {sorted(set(EXPECTED) - names)}"
    )


def test_outsider_gets_404_everywhere(world, client):
    client.force_login(world["outsider"].user)
    statuses = {}
    for name, route in tenant_patterns():
        url = fill(route, world["values"])
        statuses[name] = (client.get(url).status_code, client.post(url).status_code)
    assert statuses == {name: (404, 404) for name, _ in tenant_patterns()}


@pytest.mark.parametrize("role", ["viewer", "approver", "admin"])
def test_each_role_gets_what_its_role_allows(world, client, role):
    client.force_login(world["roles"][role].user)
    got, want = {}, {}
    for name, route in tenant_patterns():
        response = client.get(fill(route, world["values"]))
        got[name] = response.status_code
        want[name] = EXPECTED[name][role]
    assert got == want


@pytest.mark.parametrize("role", ["viewer", "approver"])
def test_forged_posts_beyond_the_role_are_refused(world, client, role):
    client.force_login(world["roles"][role].user)
    refused = {}
    for name, route in tenant_patterns():
        if EXPECTED[name][role] == 403:
            refused[name] = client.post(fill(route, world["values"])).status_code
    assert refused and set(refused.values()) == {403}


def test_another_tenants_object_ids_answer_like_missing_ones(world, client):
    """An admin of A naming B's objects under A's slug gets exactly the answer a missing id gets
    (404 on every route of ours), and nothing of B's changes."""
    from tenants.models import AgentToken, Invitation, Membership

    client.force_login(world["roles"]["admin"].user)
    missing = {p: 987654321 for p in world["foreign_objects"] if p != "slug"}
    got, want = {}, {}
    for name, route in tenant_patterns():
        if not any(f"<int:{p}>" in route for p in missing):
            continue
        gettable = EXPECTED[name]["admin"] == 200
        call = client.get if gettable else client.post
        got[name] = call(fill(route, world["foreign_objects"])).status_code
        want[name] = call(fill(route, {**world["foreign_objects"], **missing})).status_code
    assert got == want
    ours = {n: s for n, s in got.items() if not n.startswith(("token_", "mailbox_"))}
    assert ours and set(ours.values()) == {404}
    assert not AgentToken.objects.filter(tenant=world["outsider"].tenant, revoked_at__isnull=False)
    assert Membership.objects.get(pk=world["outsider"].pk).is_active
    assert (
        AgentEventEndpoint.objects.filter(tenant=world["outsider"].tenant, enabled=True).count()
        == 1
    )
    assert not AgentEventDelivery.objects.filter(resend_of__isnull=False).exists()
    assert not Invitation.objects.filter(tenant=world["outsider"].tenant).exclude(state="pending")


def test_every_html_page_carries_a_strict_csp_with_a_fresh_nonce(world, client):
    client.force_login(world["roles"]["admin"].user)
    nonces = set()
    pages = documents = 0
    for name, route in tenant_patterns():
        response = client.get(fill(route, world["values"]))
        if response.status_code != 200 or not response["Content-Type"].startswith("text/html"):
            continue
        if name in ("draft_version_html", "broadcast_sample_html"):
            # An email's HTML body, the draft's or broadcast's page's framed document: a policy
            # of its own (tests/review/test_bodies.py, test_broadcast_frame.py), framed by our
            # pages only, running nothing.
            assert response["Content-Security-Policy"] == EMAIL_DOCUMENT_POLICY
            continue
        pages += 1
        policy = response["Content-Security-Policy"]
        script_src = next(d for d in policy.split(";") if d.strip().startswith("script-src"))
        assert "'unsafe-inline'" not in script_src and "'unsafe-eval'" not in script_src, name
        assert "frame-ancestors 'none'" in policy, name
        # No remote images anywhere (a draft's or customer's HTML could carry tracking pixels).
        img_src = next(d for d in policy.split(";") if d.strip().startswith("img-src"))
        assert set(img_src.split()[1:]) <= {"'self'", "data:"}, name
        if b"<html" in response.content:
            documents += 1
            nonces.add(script_src.split("'nonce-")[1].split("'")[0])
    assert pages >= 15
    assert len(nonces) == documents


# The sign-in and account routes outside /t/<slug>/ (a person's own, no tenant): what a visitor
# who is not signed in gets from a GET. Every route of tenants/urls_account.py and the sign-in
# routes must be listed, so a new one is classified here too.
SIGNED_OUT = {
    "two_factor_verify": 302,
    "account_security": 302,
    "account_confirm": 302,
    "totp_enrol": 302,
    "totp_confirm": 302,
    "recovery_codes_renew": 302,
    "two_factor_remove": 302,
    "passkey_register_options": 302,
    "passkey_register": 302,
    "passkey_remove": 302,
    "password_change": 302,
    "sessions": 302,
    "session_end": 302,
    "passkey_signin_options": 405,
    "passkey_signin": 405,
    "sso_choose": 200,
    "sso_callback": 400,
    "sso_start": 404,
}


def signin_patterns():
    found = []

    def walk(patterns, prefix):
        for p in patterns:
            if isinstance(p, URLResolver):
                walk(p.url_patterns, prefix + str(p.pattern))
            elif isinstance(p, URLPattern):
                route = prefix + str(p.pattern)
                if route.startswith(("account/", "sso/", "signin/")) and p.name != "login":
                    found.append((p.name, route))

    walk(get_resolver().url_patterns, "")
    return found


def test_every_signin_route_is_classified_and_closed_to_strangers(client, tenant_a):
    values = {"slug": tenant_a.slug, "passkey_id": 1, "session_id": 1}
    got = {name: client.get(fill(route, values)).status_code for name, route in signin_patterns()}
    assert got == SIGNED_OUT
    for name, route in signin_patterns():
        if SIGNED_OUT[name] == 302:
            assert client.get(fill(route, values))["Location"].startswith("/signin/"), name


def test_every_page_answers_head_as_it_answers_get(world, client):
    """Uptime monitors and link checkers ask with HEAD (RFC 9110: a GET resource should answer
    it); every page answered it 405. Signed out and as an admin, who may open every page.

    And a HEAD is answered as the GET, never as the POST: a page whose GET asks first
    (deactivate, revoke, delete, rotate a secret) did what its POST does, with no CSRF check
    (HEAD is a safe method) and, for a suspended tenant, past its read-only rule."""
    from tenants.models import AuditEvent, Membership

    endpoint = AgentEventEndpoint.objects.get(pk=world["values"]["endpoint_id"])
    got = {path: client.head(path).status_code for path in ("/", "/signin/", "/sso/")}
    client.force_login(world["roles"]["admin"].user)
    audit_rows = AuditEvent.objects.count()
    for name, route in tenant_patterns():
        if EXPECTED[name]["admin"] == 200:
            got[name] = client.head(fill(route, world["values"])).status_code
    assert {k: v for k, v in got.items() if v == 405} == {}
    assert got["/"] == 302 and got["/signin/"] == 200
    assert Membership.objects.get(pk=world["values"]["membership_id"]).is_active
    assert not AgentToken.objects.filter(pk=world["values"]["token_id"], revoked_at__isnull=False)
    assert AgentEventEndpoint.objects.get(pk=endpoint.pk).secret_sealed == endpoint.secret_sealed
    assert AuditEvent.objects.count() == audit_rows
