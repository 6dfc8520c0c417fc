"""Administrative writes under concurrency: two admins acting on each other, the admins of two
tenants acting on one person, and an admin demoted or deactivated while a write of theirs is under
way. Threads on separate connections, real locks; the helpers wait for a session that waits on a
lock, never for time."""

import threading
import time

import pytest
from django.db import connection, connections, transaction
from django.urls import reverse

from console import services as console_services
from intents.models import Suppression
from intents.services import event_endpoints
from mailboxes import provisioning
from tenants import invitations, oidc_signin, onboarding, policies, services, signin_policy, tokens
from tenants.models import AgentToken, AuditEvent, Invitation, Membership, Tenant, User
from tests.factories import make_local_mailbox
from tests.intents.helpers import blocked_on_a_lock
from tests.routed_client import RoutedClient

pytestmark = pytest.mark.django_db(transaction=True)


def _sessions_waiting() -> int:
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_stat_clear_snapshot()")
        cursor.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() "
            "AND wait_event_type = 'Lock' AND pid <> pg_backend_pid()"
        )
        return cursor.fetchone()[0]


def _start(fn) -> tuple[threading.Thread, list]:
    """fn() on another connection (another web process); the list gets its result or error."""
    box: list = []

    def run():
        try:
            box.append(fn())
        except BaseException as exc:
            box.append(exc)
        finally:
            connections.close_all()

    thread = threading.Thread(target=run)
    thread.start()
    return thread, box


def _until_waiting_or_done(thread: threading.Thread, waiting: int) -> None:
    deadline = time.monotonic() + 10
    while thread.is_alive() and _sessions_waiting() < waiting and time.monotonic() < deadline:
        time.sleep(0.02)


def _crossed(first, second, *, a: Membership, b: Membership) -> list:
    """Start ``first`` (A acting on B), then ``second`` (B acting on A), while this test holds
    A's membership and B's account, then let both go on together: the interleaving in which
    two admins acting on each other deadlocked when each locked its target (the membership with
    its account) before the other admins' rows. Each waits on a lock before the test lets go."""
    with transaction.atomic():
        Membership.objects.select_for_update().filter(pk=a.pk).get()
        User.objects.select_for_update(no_key=True).filter(pk=b.user_id).get()
        one = _start(first)
        _until_waiting_or_done(one[0], 1)
        two = _start(second)
        _until_waiting_or_done(two[0], 2)
    for thread, _box in (one, two):
        thread.join(20)
    return [one[1][0], two[1][0]]


def _two_admins(tenant, member_of):
    return member_of(tenant, "admin"), member_of(tenant, "admin")


def _demote(tenant, target, actor):
    return lambda: (
        services.member_set_role(
            tenant=tenant, membership_id=target.pk, role="viewer", actor=actor.user
        ).changed
    )


def _deactivate(tenant, target, actor):
    return lambda: (
        services.member_deactivate(tenant=tenant, membership_id=target.pk, actor=actor.user).changed
    )


@pytest.mark.parametrize(
    ("a_does", "b_does"),
    [(_demote, _demote), (_deactivate, _deactivate), (_demote, _deactivate)],
    ids=["demote-demote", "deactivate-deactivate", "demote-deactivate"],
)
def test_two_admins_acting_on_each_other_one_wins_the_other_is_told_last_admin(
    tenant_a, member_of, a_does, b_does
):
    a, b = _two_admins(tenant_a, member_of)
    results = _crossed(a_does(tenant_a, b, a), b_does(tenant_a, a, b), a=a, b=b)
    assert isinstance(results[0], Membership), results
    assert isinstance(results[1], services.AdminError) and results[1].code == "last_admin"
    admins = Membership.objects.filter(tenant=tenant_a, role="admin", is_active=True)
    assert list(admins.values_list("pk", flat=True)) == [a.pk]


def test_mutual_demotion_through_the_pages_is_a_400_not_a_500(tenant_a, member_of):
    a, b = _two_admins(tenant_a, member_of)
    clients = []
    for member in (a, b):
        client = RoutedClient(raise_request_exception=False)
        client.force_login(member.user, backend="django.contrib.auth.backends.ModelBackend")
        clients.append(client)

    def demote(client, target):
        url = reverse("admin_member_role", args=[tenant_a.slug, target.pk])
        based_on = services.member_role_fingerprint(target)
        return lambda: client.post(url, {"role": "viewer", "based_on": based_on}).status_code

    results = _crossed(demote(clients[0], b), demote(clients[1], a), a=a, b=b)
    assert results == [302, 400]
    assert Membership.objects.filter(tenant=tenant_a, role="admin", is_active=True).count() == 1


def test_two_tenants_deactivating_their_shared_member_at_once_sign_the_person_out(
    tenant_a, tenant_b, member_of
):
    """Found by the two-tenant probe: a deactivation ends the person's sessions unless another
    tenant still counts them as a member. The admins of two tenants deactivating the same person
    at once each saw the other tenant's membership still active and ended nothing: the sessions
    (a stolen cookie among them) of someone who belonged nowhere lived on, and opened a tenant
    again the moment one reactivated them. The test holds both tenants' rows, which each
    deactivation's audit row waits for after it decided: the interleaving in which both
    decided before either committed."""
    in_a = member_of(tenant_a, "approver")
    person = in_a.user
    in_b = Membership.objects.create(tenant=tenant_b, user=person, role="approver")
    admin_a, admin_b = member_of(tenant_a, "admin"), member_of(tenant_b, "admin")
    browser = RoutedClient()
    browser.force_login(person, backend="django.contrib.auth.backends.ModelBackend")

    def deactivate(tenant, membership, admin):
        return lambda: (
            services.member_deactivate(
                tenant=tenant, membership_id=membership.pk, actor=admin.user
            ).changed
        )

    with transaction.atomic():
        list(Tenant.objects.select_for_update().filter(pk__in=[tenant_a.pk, tenant_b.pk]))
        one = _start(deactivate(tenant_a, in_a, admin_a))
        _until_waiting_or_done(one[0], 1)
        two = _start(deactivate(tenant_b, in_b, admin_b))
        _until_waiting_or_done(two[0], 2)
    for thread, _box in (one, two):
        thread.join(20)
    assert [type(one[1][0]), type(two[1][0])] == [Membership, Membership]
    ended = AuditEvent.objects.filter(action="member.deactivated").values_list(
        "data__sessions_ended", flat=True
    )
    assert sorted(ended) == [0, 1]
    services.member_reactivate(tenant=tenant_a, membership_id=in_a.pk, actor=admin_a.user)
    assert browser.get(reverse("tenant_home", args=[tenant_a.slug])).status_code == 302


@pytest.mark.parametrize("how", ["demoted", "deactivated"])
def test_an_invitation_waits_for_the_inviters_demotion_under_way_and_is_refused(
    tenant_a, member_of, how
):
    """A demotion withdraws the admin's pending invitations: one written after it would stay
    a live admin link in the hands of someone who is no longer an admin."""
    alice, bob = _two_admins(tenant_a, member_of)
    change = (_demote if how == "demoted" else _deactivate)(tenant_a, alice, bob)
    changed, release = threading.Event(), threading.Event()

    def change_and_hold():
        with transaction.atomic():
            change()
            changed.set()
            release.wait(10)

    holder = _start(change_and_hold)
    assert changed.wait(10)
    inviting = _start(
        lambda: invitations.invitation_create(
            tenant=tenant_a, email="alice-again@example.test", role="admin", actor=alice.user
        )
    )
    waited = blocked_on_a_lock()
    release.set()
    for thread, _box in (holder, inviting):
        thread.join(20)
    assert waited
    assert isinstance(inviting[1][0], services.NotAnAdmin)
    assert not Invitation.objects.filter(tenant=tenant_a, state="pending").exists()


def _writes(tenant, actor, member, mailbox, token, invitation, suppression, endpoint):
    """Every administrative write, as the console calls it, by ``actor``."""
    t, a = tenant, actor
    return {
        "invite": lambda: invitations.invitation_create(
            tenant=t, email="new@example.test", role="admin", actor=a
        ),
        "revoke invitation": lambda: invitations.invitation_revoke(
            tenant=t, invitation_id=invitation.pk, actor=a
        ),
        "role": lambda: services.member_set_role(
            tenant=t, membership_id=member.pk, role="admin", actor=a
        ),
        "rights": lambda: services.member_set_mailbox_rights(
            tenant=t, membership_id=member.pk, approve_all_mailboxes=False, mailbox_ids=[], actor=a
        ),
        "deactivate": lambda: services.member_deactivate(
            tenant=t, membership_id=member.pk, actor=a
        ),
        "reactivate": lambda: services.member_reactivate(
            tenant=t, membership_id=member.pk, actor=a
        ),
        "policies": lambda: policies.tenant_update_policies(
            tenant=t,
            review_deadline_hours=1,
            second_approver_on_edit=True,
            retention_days=1,
            actor=a,
        ),
        "own domains": lambda: policies.tenant_set_own_domains(
            tenant=t, domains=["evil.example"], actor=a
        ),
        "deadlines": lambda: policies.tenant_update_deadlines(
            tenant=t,
            sla_minutes=5,
            sla_warning_minutes=None,
            escalate_to_id=None,
            escalate_to_role="",
            actor=a,
        ),
        "two-factor rule": lambda: signin_policy.tenant_require_two_factor(
            tenant=t, required=True, actor=a
        ),
        "two-factor reset": lambda: signin_policy.member_reset_two_factor(
            tenant=t, membership_id=member.pk, actor=a
        ),
        "sso": lambda: oidc_signin.sso_settings_save(
            tenant=t,
            actor=a,
            enabled=False,
            issuer="https://idp.example",
            client_id="x",
            client_secret="s",
            password_signin_allowed=True,
            domains=[],
            jit_role="",
        ),
        "token": lambda: tokens.token_create(
            tenant=t, name="new", scopes=["drafts:write"], actor=a
        ),
        "revoke token": lambda: tokens.token_revoke(tenant=t, token_id=token.pk, actor=a),
        "suppress": lambda: console_services.suppression_add(
            tenant=t, address="x@example.com", note="n", actor=a
        ),
        "unsuppress": lambda: console_services.suppression_remove(
            tenant=t, suppression_id=suppression.pk, reason="r", actor=a
        ),
        "mailbox policy": lambda: provisioning.mailbox_update_policy(
            tenant=t,
            mailbox_id=mailbox.pk,
            policy_mode="open",
            allowed_domains=[],
            allowed_addresses=[],
            display_name="Evil",
            actor=a,
        ),
        "mailbox status": lambda: provisioning.mailbox_set_status(
            tenant=t, mailbox_id=mailbox.pk, status="disabled", actor=a
        ),
        "mailbox assignment": lambda: provisioning.mailbox_update_assignment(
            tenant=t, mailbox_id=mailbox.pk, sla_minutes=5, auto_assign=True, actor=a
        ),
        "endpoint": lambda: event_endpoints.endpoint_create(
            tenant=t, url="https://a.example.com/x", event_types=["draft.approved"], actor=a
        ),
        "rotate": lambda: event_endpoints.endpoint_rotate_secret(
            tenant=t, endpoint_id=endpoint.pk, actor=a
        ),
        "disable endpoint": lambda: event_endpoints.endpoint_disable(
            tenant=t, endpoint_id=endpoint.pk, actor=a
        ),
        "delete endpoint": lambda: event_endpoints.endpoint_delete(
            tenant=t, endpoint_id=endpoint.pk, actor=a
        ),
    }


def _everything(tenant):
    return (
        list(
            Membership.objects.filter(tenant=tenant)
            .order_by("pk")
            .values_list("role", "is_active", "is_away", "approve_all_mailboxes")
        ),
        list(Invitation.objects.filter(tenant=tenant).values_list("state", flat=True)),
        list(AgentToken.objects.filter(tenant=tenant).values_list("revoked_at", flat=True)),
        Suppression.objects.filter(tenant=tenant).count(),
        Tenant.objects.filter(pk=tenant.pk)
        .values_list("review_deadline_hours", "own_domains", "sla_minutes", "require_two_factor")
        .get(),
        AuditEvent.objects.filter(tenant=tenant).count(),
    )


@pytest.mark.parametrize("how", ["demoted", "deactivated"])
def test_every_admin_write_refuses_an_actor_who_is_no_longer_an_admin(tenant_a, member_of, how):
    """The role is checked when a request starts; each write checks it again, locked, in its
    own transaction, so a request under way when its admin was demoted changes nothing."""
    alice, bob = _two_admins(tenant_a, member_of)
    member = member_of(tenant_a, "approver")
    mailbox = make_local_mailbox(tenant_a)
    token, _ = tokens.token_create(
        tenant=tenant_a, name="t", scopes=["drafts:write"], actor=bob.user
    )
    invitation, _ = invitations.invitation_create(
        tenant=tenant_a, email="someone@example.test", role="viewer", actor=bob.user
    )
    suppression, _ = Suppression.objects.get_or_create(
        tenant=tenant_a, address="gone@example.com", defaults={"reason": "manual", "note": "n"}
    )
    endpoint, _ = event_endpoints.endpoint_create(
        tenant=tenant_a,
        url="https://a.example.com/y",
        event_types=["draft.approved"],
        actor=bob.user,
    )
    (_demote if how == "demoted" else _deactivate)(tenant_a, alice, bob)()
    before = _everything(tenant_a)
    writes = _writes(
        tenant_a, alice.user, member, mailbox, token, invitation, suppression, endpoint
    )
    refused = {}
    for name, write in writes.items():
        try:
            write()
        except services.NotAnAdmin as exc:
            refused[name] = exc.message
    assert sorted(refused) == sorted(writes)
    assert _everything(tenant_a) == before
    assert "no longer an admin" in refused["invite"]


def _admin_graph(tenant, member_of):
    alice, bob = _two_admins(tenant, member_of)
    member = member_of(tenant, "approver")
    mailbox = make_local_mailbox(tenant)
    token, _ = tokens.token_create(tenant=tenant, name="t", scopes=["drafts:write"], actor=bob.user)
    invitation, _ = invitations.invitation_create(
        tenant=tenant, email="someone@example.test", role="viewer", actor=bob.user
    )
    suppression, _ = Suppression.objects.get_or_create(
        tenant=tenant, address="gone@example.com", defaults={"reason": "manual", "note": "n"}
    )
    endpoint, _ = event_endpoints.endpoint_create(
        tenant=tenant, url="https://a.example.com/y", event_types=["draft.approved"], actor=bob.user
    )
    return alice, _writes(
        tenant, alice.user, member, mailbox, token, invitation, suppression, endpoint
    )


def test_every_admin_write_refuses_once_an_operator_has_suspended_the_tenant(tenant_a, member_of):
    """The suspension is checked when a request starts (``tenants.access``); a write under
    way when an operator's suspension committed went through, each with its audit row, in a
    tenant that is read-only. Each write reads the tenant's status again in its transaction."""
    _alice, writes = _admin_graph(tenant_a, member_of)
    onboarding.tenant_suspend(slug=tenant_a.slug, reason="unpaid")
    before = _everything(tenant_a)
    refused = {}
    for name, write in writes.items():
        try:
            write()
        except services.TenantSuspended as exc:
            refused[name] = exc.message
    assert sorted(refused) == sorted(writes)
    assert _everything(tenant_a) == before
    assert refused["token"] == "This tenant is suspended; it is read-only."


@pytest.mark.parametrize("name", ["token", "mailbox status", "role", "policies", "suppress"])
def test_an_admin_write_under_way_while_the_tenant_is_suspended_waits_and_is_refused(
    tenant_a, member_of, name
):
    """The suspension in flight (its row lock held) is waited for and seen; a write that holds
    sends (a mailbox disabled, a role lowered, a policy, a suppression) reads it after the
    sends, as the suspension takes them first: no deadlock between the two."""
    _alice, writes = _admin_graph(tenant_a, member_of)
    suspended, release = threading.Event(), threading.Event()

    def suspend_and_hold():
        with transaction.atomic():
            onboarding.tenant_suspend(slug=tenant_a.slug, reason="unpaid")
            suspended.set()
            release.wait(10)

    holder = _start(suspend_and_hold)
    assert suspended.wait(10)
    before = _everything(tenant_a)
    writing = _start(writes[name])
    waited = blocked_on_a_lock()
    release.set()
    for thread, _box in (holder, writing):
        thread.join(20)
    assert waited
    assert isinstance(writing[1][0], services.TenantSuspended)
    assert _everything(tenant_a)[:-1] == before[:-1]
