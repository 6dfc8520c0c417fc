"""Console → Agent events: the secret shown once, precise URL and field errors, resend, what a
refused delivery tells the admin, the endpoint cap under concurrent adds, and only the tenant's
own admins (another tenant's admin gets 404 and changes nothing; a user of two tenants acts only
where they are admin; an agent token gets nothing)."""

from __future__ import annotations

import re
import socket
import threading
import time

import pytest
from django.db import connection, transaction
from django.test import Client

from intents import services as intent_services
from intents.events.delivery import deliver_due
from intents.models import AgentEventDelivery, AgentEventEndpoint
from intents.services import event_endpoints
from intents.services.event_endpoints import endpoint_create
from tenants.models import AuditEvent
from tenants.services import AdminError
from tenants.tokens import token_create
from tests.factories import make_local_mailbox

BASE = "/t/tenant-a/admin/agent-events/"


def rejected_draft(tenant, member_of):
    approver = member_of(tenant, "approver").user
    draft = intent_services.draft_create(
        tenant=tenant,
        mailbox=make_local_mailbox(tenant),
        to=["jane@customer.test"],
        subject="Hi",
        text="Hello",
        actor_user=approver,
    )
    intent_services.draft_reject(tenant=tenant, draft_id=draft.pk, reason="No", actor=approver)
    return draft


@pytest.mark.django_db
def test_admin_adds_an_endpoint_and_sees_the_secret_exactly_once(tenant_a, member_of, signed_in):
    client = signed_in(member_of(tenant_a, "admin").user)

    created = client.post(
        f"{BASE}new/",
        {"url": "https://agent.example.com/hooks", "event_types": ["draft.approved"]},
    )
    secret = re.search(r'value="(whsec_[^"]+)"', created.content.decode()).group(1)
    listing = client.get(BASE)

    endpoint = AgentEventEndpoint.objects.get()
    assert created.status_code == 200
    assert "no-store" in created["Cache-Control"]
    assert endpoint.secrets(endpoint.created_at) == [secret]
    assert secret not in endpoint.secret_sealed
    assert listing.status_code == 200
    assert secret not in listing.content.decode()
    assert "https://agent.example.com/hooks" in listing.content.decode()
    assert AuditEvent.objects.filter(action="agent_events.endpoint_created").count() == 1


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("url", "message"),
    [
        ("http://agent.example.com/hooks", "must use https"),
        ("https://user:pw@agent.example.com/", "user name or password"),
        ("https://10.0.0.7/hooks", "not a public address"),
        ("https://169.254.169.254/", "never a delivery address"),
        ("javascript:alert(1)", "must start with https"),
        ("https://agent.example.com/a b", "spaces, control or invisible characters (U+0020)"),
        ("https://agent.example.com/\x00", "Null characters are not allowed"),
        ("https://agent.example.com/\x7f", "(U+007F)"),
        ("https://agent.example.com/a\u0085b", "(U+0085)"),
        ("https://agent.example.com\u00a0/hooks", "(U+00A0)"),
        ("https://999.1.1.1/hooks", "999.1.1.1 is not a valid host name or IP address"),
    ],
)
def test_a_bad_url_gets_a_precise_error_and_creates_nothing(
    tenant_a, member_of, signed_in, settings, url, message
):
    settings.AGENT_EVENTS_ALLOW_PRIVATE_NETWORKS = False
    client = signed_in(member_of(tenant_a, "admin").user)

    response = client.post(f"{BASE}new/", {"url": url, "event_types": ["draft.approved"]})

    assert response.status_code == 422
    assert message in response.content.decode()
    assert AgentEventEndpoint.objects.count() == 0


@pytest.mark.django_db
def test_another_tenants_mailbox_or_no_events_are_refused(tenant_a, tenant_b, member_of, signed_in):
    client = signed_in(member_of(tenant_a, "admin").user)
    foreign = make_local_mailbox(tenant_b)

    no_types = client.post(f"{BASE}new/", {"url": "https://a.example.com/", "event_types": []})
    foreign_mailbox = client.post(
        f"{BASE}new/",
        {"url": "https://a.example.com/", "event_types": ["draft.approved"], "mailbox": foreign.pk},
    )

    assert (no_types.status_code, foreign_mailbox.status_code) == (422, 422)
    assert AgentEventEndpoint.objects.count() == 0


@pytest.mark.django_db(transaction=True)
def test_admin_resends_a_delivery_as_a_new_delivery_of_the_same_event(
    tenant_a, member_of, signed_in, receiver, subscribe
):
    subscribe(tenant_a, receiver, types=["draft.rejected"])
    rejected_draft(tenant_a, member_of)
    deliver_due()
    first = AgentEventDelivery.objects.get()
    client = signed_in(member_of(tenant_a, "admin").user)

    resent = client.post(f"{BASE}deliveries/{first.pk}/resend/")
    deliver_due()
    page = client.get(BASE)

    again = AgentEventDelivery.objects.exclude(pk=first.pk).get()
    assert resent.status_code == 302
    assert (again.resend_of_id, again.event_id, again.status) == (
        first.pk,
        first.event_id,
        "delivered",
    )
    assert receiver.types == ["draft.rejected", "draft.rejected"]
    assert receiver.headers[0]["webhook-id"] == receiver.headers[1]["webhook-id"]
    assert page.content.decode().count('data-delivery="') == 2


@pytest.mark.django_db
def test_admin_disables_enables_rotates_and_deletes(tenant_a, member_of, signed_in):
    admin = member_of(tenant_a, "admin").user
    endpoint, old = endpoint_create(
        tenant=tenant_a, url="https://a.example.com/", event_types=["draft.approved"], actor=admin
    )
    client = signed_in(admin)

    disabled = client.post(f"{BASE}{endpoint.pk}/disable/")
    endpoint.refresh_from_db()
    state_off = (endpoint.enabled, endpoint.disabled_reason)
    page = client.get(BASE).content.decode()
    enabled = client.post(f"{BASE}{endpoint.pk}/enable/")
    endpoint.refresh_from_db()
    state_on = endpoint.enabled
    question = client.get(f"{BASE}{endpoint.pk}/rotate/").content
    rotated = client.post(f"{BASE}{endpoint.pk}/rotate/", confirm_form(question))
    new = re.search(r'value="(whsec_[^"]+)"', rotated.content.decode()).group(1)
    endpoint.refresh_from_db()
    signing = endpoint.secrets(endpoint.created_at)
    confirm = client.get(f"{BASE}{endpoint.pk}/delete/")
    deleted = client.post(f"{BASE}{endpoint.pk}/delete/")

    assert (disabled.status_code, enabled.status_code, rotated.status_code) == (302, 302, 200)
    assert state_off == (False, f"Disabled by {admin.display_name}")
    assert f"Disabled by {admin.display_name}" in page
    assert state_on is True
    assert signing == [new, old]
    assert (confirm.status_code, deleted.status_code) == (200, 302)
    assert AgentEventEndpoint.objects.count() == 0


@pytest.mark.django_db(transaction=True)
def test_another_tenants_admin_cannot_see_resend_rotate_disable_or_delete(
    tenant_a, tenant_b, member_of, signed_in, receiver, subscribe
):
    endpoint = subscribe(tenant_a, receiver, types=["draft.rejected"])
    rejected_draft(tenant_a, member_of)
    deliver_due()
    delivery = AgentEventDelivery.objects.get()
    client = signed_in(member_of(tenant_b, "admin").user)
    own = "/t/tenant-b/admin/agent-events/"

    answers = [
        client.get(BASE).status_code,
        client.get(own).status_code,
        client.post(f"{own}deliveries/{delivery.pk}/resend/").status_code,
        client.post(f"{own}{endpoint.pk}/rotate/").status_code,
        client.get(f"{own}{endpoint.pk}/rotate/").status_code,
        client.post(f"{own}{endpoint.pk}/disable/").status_code,
        client.post(f"{own}{endpoint.pk}/delete/").status_code,
    ]
    listing = client.get(own).content.decode()

    endpoint.refresh_from_db()
    assert answers == [404, 200, 404, 404, 404, 404, 404]
    assert receiver.url not in listing
    assert endpoint.enabled is True
    assert AgentEventDelivery.objects.count() == 1
    assert endpoint.secrets(endpoint.created_at) == [receiver.secret]


@pytest.mark.django_db
@pytest.mark.parametrize("role", ["approver", "viewer"])
def test_non_admins_cannot_reach_the_page(tenant_a, member_of, signed_in, role):
    admin = member_of(tenant_a, "admin").user
    endpoint, _ = endpoint_create(
        tenant=tenant_a, url="https://a.example.com/", event_types=["draft.approved"], actor=admin
    )
    client = signed_in(member_of(tenant_a, role).user)

    answers = [
        client.get(BASE).status_code,
        client.post(f"{BASE}new/", {"url": "https://b.example.com/"}).status_code,
        client.post(f"{BASE}{endpoint.pk}/disable/").status_code,
        client.post(f"{BASE}{endpoint.pk}/delete/").status_code,
    ]

    assert answers == [403, 403, 403, 403]
    assert list(AgentEventEndpoint.objects.values_list("enabled", flat=True)) == [True]


@pytest.mark.django_db
@pytest.mark.parametrize(
    "fields",
    [
        {"description": "a\x00b"},
        {"description": "x" * 100_000},
        # Shown to the tenant's other admins beside the URL (an outside probe found both kept).
        {"description": "prod \u202eoreh"},
        {"description": "prod\x1b[8m"},
        # Draws nothing: "prod" with a zero-width space read as the "prod" beside it, and one of
        # only U+2060 as no description at all (a token's name refuses both).
        {"description": "pro\u200bd"},
        {"description": "\u2060"},
        {"url": "https://hooks.example.com/" + "a" * 5000},
        {"event_types": ["draft.rejected", "nope"]},
        {"event_types": ["draft.rejected\x00"]},
        {"mailbox": "abc"},
        {"mailbox": "99999999999999999999999"},
        {"mailbox": "\x00"},
    ],
)
def test_bad_fields_are_refused_and_create_nothing(tenant_a, member_of, signed_in, fields):
    client = signed_in(member_of(tenant_a, "admin").user)
    data = {"url": "https://hooks.example.com/in", "event_types": ["draft.rejected"], **fields}

    response = client.post(f"{BASE}new/", data)

    assert response.status_code == 422
    assert AgentEventEndpoint.objects.count() == 0


@pytest.mark.django_db
def test_html_in_the_url_and_description_is_shown_escaped(tenant_a, member_of, signed_in):
    client = signed_in(member_of(tenant_a, "admin").user)
    created = client.post(
        f"{BASE}new/",
        {
            "url": 'https://hooks.example.com/"><script>alert(1)</script>',
            "description": "<img src=x onerror=alert(1)>",
            "event_types": ["draft.rejected"],
        },
    )
    endpoint = AgentEventEndpoint.objects.get()

    pages = [
        created,
        client.get(BASE),
        client.get(f"{BASE}{endpoint.pk}/rotate/"),
        client.get(f"{BASE}{endpoint.pk}/delete/"),
        client.get("/t/tenant-a/admin/audit/"),
    ]

    assert [page.status_code for page in pages] == [200] * 5
    assert not [p for p in pages if "<script>alert(1)" in p.content.decode()]
    assert not [p for p in pages if "<img src=x" in p.content.decode()]


@pytest.mark.django_db
@pytest.mark.parametrize(
    "path",
    [
        "99999999999999999999999/rotate/",
        "99999999999999999999999/delete/",
        "99999999999999999999999/disable/",
        "99999999999999999999999/enable/",
        "9223372036854775808/rotate/",
        "deliveries/99999999999999999999999/resend/",
    ],
)
def test_ids_past_the_column_answer_404(tenant_a, member_of, signed_in, path):
    client = signed_in(member_of(tenant_a, "admin").user)

    answers = [client.get(BASE + path).status_code, client.post(BASE + path).status_code]

    assert set(answers) <= {404, 405} and 404 in answers


@pytest.mark.django_db
def test_a_user_admin_of_one_tenant_and_approver_of_another_manages_only_the_first(
    tenant_a, tenant_b, member_of, signed_in
):
    admin_a = member_of(tenant_a, "admin").user
    member_of(tenant_b, "approver", user=admin_a)
    theirs, _ = endpoint_create(
        tenant=tenant_b,
        url="https://b.example.com/",
        event_types=["draft.rejected"],
        actor=member_of(tenant_b, "admin").user,
    )
    client = signed_in(admin_a)
    other = "/t/tenant-b/admin/agent-events/"

    answers = [
        client.get(BASE).status_code,
        client.get(other).status_code,
        client.post(f"{other}{theirs.pk}/rotate/").status_code,
        client.post(f"{other}{theirs.pk}/delete/").status_code,
        client.post(
            f"{other}new/", {"url": "https://x.example.com/", "event_types": ["draft.rejected"]}
        ).status_code,
    ]

    assert answers == [200, 403, 403, 403, 403]
    assert list(AgentEventEndpoint.objects.values_list("tenant_id", flat=True)) == [tenant_b.pk]
    assert theirs.secrets(theirs.created_at) == AgentEventEndpoint.objects.get().secrets(
        theirs.created_at
    )


@pytest.mark.django_db
def test_an_agent_token_cannot_use_the_console(tenant_a, member_of, client):
    admin = member_of(tenant_a, "admin").user
    endpoint, _ = endpoint_create(
        tenant=tenant_a, url="https://a.example.com/", event_types=["draft.rejected"], actor=admin
    )
    _, token = token_create(
        tenant=tenant_a,
        name="agent",
        scopes=["drafts:write", "drafts:read"],
        mailbox_ids=[],
        expires_at=None,
        actor=admin,
    )
    bearer = {"Authorization": f"Bearer {token}"}

    answers = [
        client.get(BASE, headers=bearer).status_code,
        client.post(f"{BASE}{endpoint.pk}/rotate/", headers=bearer).status_code,
        client.post(f"{BASE}{endpoint.pk}/delete/", headers=bearer).status_code,
    ]

    assert answers == [302, 302, 302]
    assert AgentEventEndpoint.objects.get().secret_sealed == endpoint.secret_sealed


@pytest.mark.django_db(transaction=True)
def test_a_refused_delivery_names_the_host_never_the_address_it_resolved_to(
    tenant_a, member_of, signed_in, settings, monkeypatch
):
    """A name only the deployment's DNS knows is refused (production: private networks refused);
    the deliveries table, the disabled reason and the audit log name the host the admin typed.
    Showing the resolver's answer let a tenant admin map the internal network name by name."""
    real = socket.getaddrinfo

    def resolve(host, port, *args, **kwargs):
        if host == "billing-db.internal.test":
            return [(socket.AF_INET, socket.SOCK_STREAM, 6, "", ("10.23.45.67", port))]
        return real(host, port, *args, **kwargs)

    monkeypatch.setattr(socket, "getaddrinfo", resolve)
    settings.AGENT_EVENTS_ALLOW_PRIVATE_NETWORKS = False
    settings.AGENT_EVENTS_RETRY_DELAYS = []
    admin = member_of(tenant_a, "admin").user
    endpoint_create(
        tenant=tenant_a,
        url="https://billing-db.internal.test:5432/",
        event_types=["draft.rejected"],
        actor=admin,
    )
    rejected_draft(tenant_a, member_of)
    deliver_due()
    client = signed_in(admin)

    page = client.get(BASE).content.decode()
    audit = client.get("/t/tenant-a/admin/audit/").content.decode()

    assert AgentEventDelivery.objects.get().status == "failed"
    assert AgentEventEndpoint.objects.get().disabled_reason == (
        "address_private: billing-db.internal.test resolves to an address that is not public."
    )
    assert "billing-db.internal.test resolves to an address that is not public." in page
    assert "10.23.45.67" not in page
    assert "10.23.45.67" not in audit


def sessions_waiting_on_a_lock(n: int, timeout: float = 10.0) -> bool:
    """Whether ``n`` other sessions of this database wait on a lock within ``timeout``."""
    since = time.monotonic()
    with connection.cursor() as cursor:
        while time.monotonic() - since < timeout:
            cursor.execute("SELECT pg_stat_clear_snapshot()")
            cursor.execute(
                "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() "
                "AND wait_event_type = 'Lock' AND pid <> pg_backend_pid()"
            )
            if cursor.fetchone()[0] >= n:
                return True
            time.sleep(0.02)
    return False


@pytest.mark.django_db(transaction=True)
def test_two_admins_adding_the_last_endpoint_at_once_do_not_pass_the_cap(tenant_a, member_of):
    """Each add counts the tenant's endpoints, then inserts. The test holds inserts into the
    endpoint table (a SHARE lock, which lets the counts run) until both adds wait: without the
    tenant's row lock both had counted one under the cap and both inserted."""
    admin = member_of(tenant_a, "admin").user
    for i in range(event_endpoints.MAX_ENDPOINTS - 1):
        endpoint_create(
            tenant=tenant_a,
            url=f"https://h{i}.example.com/",
            event_types=["draft.rejected"],
            actor=admin,
        )
    outcomes: list[object] = []

    def add(n: int) -> None:
        try:
            outcomes.append(
                endpoint_create(
                    tenant=tenant_a,
                    url=f"https://race{n}.example.com/",
                    event_types=["draft.rejected"],
                    actor=admin,
                )[0]
            )
        except AdminError as exc:
            outcomes.append(exc.code)
        finally:
            connection.close()

    threads = [threading.Thread(target=add, args=(n,)) for n in range(2)]
    with transaction.atomic():
        with connection.cursor() as cursor:
            cursor.execute(f"LOCK TABLE {AgentEventEndpoint._meta.db_table} IN SHARE MODE")
        for thread in threads:
            thread.start()
        both_waiting = sessions_waiting_on_a_lock(2)
    for thread in threads:
        thread.join(30)

    assert both_waiting
    assert AgentEventEndpoint.objects.filter(tenant=tenant_a).count() == (
        event_endpoints.MAX_ENDPOINTS
    )
    assert sorted(o if isinstance(o, str) else "added" for o in outcomes) == [
        "added",
        "too_many_endpoints",
    ]


@pytest.mark.django_db
def test_a_second_rotation_inside_the_first_ones_day_says_it_ends_the_oldest_secret(
    tenant_a, member_of, signed_in
):
    """Found by an outside probe: two secrets sign at most, so a second rotation within 24 hours
    of the first stopped the oldest secret at once, while the page had promised it 24 hours."""
    admin = member_of(tenant_a, "admin").user
    endpoint, _ = endpoint_create(
        tenant=tenant_a, url="https://a.example.com/", event_types=["draft.approved"], actor=admin
    )
    client = signed_in(admin)
    warning = "rotating again stops it now"

    first = client.get(f"{BASE}{endpoint.pk}/rotate/").content
    client.post(f"{BASE}{endpoint.pk}/rotate/", confirm_form(first))
    second = client.get(f"{BASE}{endpoint.pk}/rotate/").content.decode()

    assert warning not in first.decode()
    assert warning in second


def confirm_form(page) -> dict:
    """The hidden fields of a confirm page's form, as the browser posts them (no CSRF token)."""
    fields = re.findall(r'<input type="hidden" name="([^"]+)" value="([^"]*)"', page.decode())
    return {name: value for name, value in fields if name != "csrfmiddlewaretoken"}


@pytest.mark.django_db
def test_a_rotation_asked_on_a_page_opened_before_another_admins_rotation_is_refused(
    tenant_a, member_of, signed_in
):
    """Found by an outside probe (two admins at once): the question page, opened before another
    admin rotated, promised that the receiver's secret keeps signing for 24 hours; its answer
    rotated again, which stopped that secret at once (two sign at most). It is now refused, says
    why, and asks again with the current consequence; nothing is changed or audited."""
    first_admin, second_admin = (member_of(tenant_a, "admin").user for _ in range(2))
    endpoint, receivers = endpoint_create(
        tenant=tenant_a,
        url="https://a.example.com/",
        event_types=["draft.approved"],
        actor=first_admin,
    )
    other = Client()
    other.force_login(second_admin, backend="django.contrib.auth.backends.ModelBackend")
    client = signed_in(first_admin)
    question = client.get(f"{BASE}{endpoint.pk}/rotate/").content
    theirs = other.get(f"{BASE}{endpoint.pk}/rotate/").content
    other.post(f"{BASE}{endpoint.pk}/rotate/", confirm_form(theirs))
    audit_rows = AuditEvent.objects.count()

    answer = client.post(f"{BASE}{endpoint.pk}/rotate/", confirm_form(question))

    endpoint.refresh_from_db()
    page = answer.content.decode()
    assert answer.status_code == 409
    assert "rotated since you opened this page" in page
    assert "rotating again stops it now" in page
    assert receivers in endpoint.secrets(endpoint.created_at)
    assert AuditEvent.objects.count() == audit_rows


@pytest.mark.django_db
def test_a_rotation_posted_twice_rotates_once(tenant_a, member_of, signed_in):
    """A double click on "Rotate the secret" posted the question's answer twice: two rotations,
    the second of which stopped the receiver's secret at once."""
    admin = member_of(tenant_a, "admin").user
    endpoint, receivers = endpoint_create(
        tenant=tenant_a, url="https://a.example.com/", event_types=["draft.approved"], actor=admin
    )
    client = signed_in(admin)
    answer = confirm_form(client.get(f"{BASE}{endpoint.pk}/rotate/").content)

    statuses = [client.post(f"{BASE}{endpoint.pk}/rotate/", answer).status_code for _ in range(2)]

    endpoint.refresh_from_db()
    assert statuses == [200, 409]
    assert receivers in endpoint.secrets(endpoint.created_at)
    assert AuditEvent.objects.filter(action="agent_events.secret_rotated").count() == 1


@pytest.mark.django_db
def test_the_add_form_posted_twice_adds_one_endpoint(tenant_a, member_of, signed_in):
    """Found by an outside probe: a double click on Add posted the form twice, and two endpoints
    took the same URL: every event went there twice, one of them signed with a secret that was
    never shown (the browser showed the second answer), which the receiver refused until the
    endpoint was switched off automatically. The second is refused and says what to do."""
    client = signed_in(member_of(tenant_a, "admin").user)
    form = {"url": "https://agent.example.com/hooks", "event_types": ["draft.approved"]}

    answers = [client.post(f"{BASE}new/", form) for _ in range(2)]

    assert [a.status_code for a in answers] == [200, 422]
    assert "already has an endpoint for this URL that takes" in answers[1].content.decode()
    assert AgentEventEndpoint.objects.count() == 1
    assert AuditEvent.objects.filter(action="agent_events.endpoint_created").count() == 1


@pytest.mark.django_db
def test_one_url_may_take_the_events_of_different_mailboxes(tenant_a, member_of, signed_in):
    client = signed_in(member_of(tenant_a, "admin").user)
    url = "https://agent.example.com/hooks"
    first, second = make_local_mailbox(tenant_a), make_local_mailbox(tenant_a, "sales")

    answers = [
        client.post(
            f"{BASE}new/", {"url": url, "event_types": ["draft.approved"], "mailbox": mailbox.pk}
        ).status_code
        for mailbox in (first, second)
    ]

    assert answers == [200, 200]
    assert AgentEventEndpoint.objects.filter(url=url).count() == 2
