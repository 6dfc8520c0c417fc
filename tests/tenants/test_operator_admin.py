"""The operators' Django admin keeps the address rule the rest of the product relies on (every
address lower-cased, one account per address whatever its case), and writes tenants only through
tenants.onboarding (read-only tenants and memberships; the Suspend and Resume actions)."""

import pytest
from django.db import transaction
from django.test import Client
from django.urls import reverse

from tenants import onboarding
from tenants.models import AuditEvent, Membership, Tenant, User, UserSession
from tenants.tokens import token_create

pytestmark = pytest.mark.django_db

ADD = "/ops/admin/tenants/user/add/"


PASSWORD = "a-long-enough-passphrase-77"


def add(operator, email):
    return operator.post(
        ADD,
        {"email": email, "password1": PASSWORD, "password2": PASSWORD, "usable_password": "true"},
    )


def test_an_account_added_in_mixed_case_is_stored_lower_case_and_can_sign_in(operator):
    response = add(operator, "  Bob@Acme.TEST ")

    assert response.status_code == 302, response.content.decode()[:2000]
    assert list(User.objects.values_list("email", flat=True).filter(is_superuser=False)) == [
        "bob@acme.test"
    ]
    signed_in = Client().post(reverse("login"), {"username": "Bob@Acme.TEST", "password": PASSWORD})
    assert signed_in.status_code == 302


def test_the_same_address_in_another_case_is_a_form_error_not_a_second_account(operator):
    User.objects.create_user("bob@acme.test", "whatever-1")

    response = add(operator, "BOB@acme.test")

    assert response.status_code == 200
    assert "already exists" in response.content.decode()
    assert User.objects.filter(email__iexact="bob@acme.test").count() == 1


@pytest.mark.parametrize(
    "model", ["agenttoken", "auditevent", "invitation"], ids=["token", "audit", "invitation"]
)
def test_operators_cannot_add_tokens_audit_rows_or_invitations_here(operator, tenant_a, model):
    """An agent token added here had no secret (the second add was a 500), and an audit row added
    here would be a forgery: both go through their services."""
    page = operator.get(f"/ops/admin/tenants/{model}/add/")
    posted = operator.post(f"/ops/admin/tenants/{model}/add/", {"tenant": tenant_a.pk})

    assert (page.status_code, posted.status_code) == (403, 403)


def test_a_token_is_read_only_here(operator, tenant_a):
    token, _ = token_create(tenant=tenant_a, name="bot", scopes=["drafts:read"], actor=None)

    page = operator.get(f"/ops/admin/tenants/agenttoken/{token.pk}/change/")
    operator.post(
        f"/ops/admin/tenants/agenttoken/{token.pk}/change/",
        {"tenant": tenant_a.pk, "name": "renamed", "scopes": "drafts:read,drafts:write"},
    )

    token.refresh_from_db()
    assert page.status_code == 200
    assert (token.name, token.scopes) == ("bot", ["drafts:read"])


TENANTS = "/ops/admin/tenants/tenant/"


def test_a_tenant_cannot_be_added_changed_or_deleted_here(operator, tenant_a, member_of):
    """Status, names and memberships used to be edited here with no audit row and none of the
    services' checks (suspension, the last admin, mailboxes of other tenants)."""
    admin = member_of(tenant_a, "admin")
    change = f"{TENANTS}{tenant_a.pk}/change/"

    page = operator.get(change)
    posted = operator.post(
        change,
        {
            "name": "Renamed",
            "slug": "renamed",
            "status": "suspended",
            "review_deadline_hours": "0",
            "retention_days": "1",
            "send_hold_seconds": "0",
            "memberships-TOTAL_FORMS": "1",
            "memberships-INITIAL_FORMS": "1",
            "memberships-0-id": str(admin.pk),
            "memberships-0-tenant": str(tenant_a.pk),
            "memberships-0-user": str(admin.user.pk),
            "memberships-0-role": "viewer",
        },
    )
    added = operator.post(f"{TENANTS}add/", {"name": "New", "slug": "new"})
    deleted = operator.post(f"{TENANTS}{tenant_a.pk}/delete/", {"post": "yes"})

    assert page.status_code == 200
    assert b'name="memberships-0-role"' not in page.content
    assert b'name="name"' not in page.content
    assert (posted.status_code, added.status_code, deleted.status_code) == (403, 403, 403)
    tenant_a.refresh_from_db()
    admin.refresh_from_db()
    assert (tenant_a.name, tenant_a.slug, tenant_a.status) == ("Tenant A", "tenant-a", "active")
    assert admin.role == "admin"
    assert list(Tenant.objects.values_list("slug", flat=True)) == ["tenant-a"]


def test_the_list_still_finds_tenants(operator, tenant_a, tenant_b):
    found = operator.get(TENANTS, {"q": "tenant-b"})

    assert found.status_code == 200
    assert b"Tenant B" in found.content and b"Tenant A" not in found.content


def test_the_storage_quota_is_shown_read_only(operator, tenant_a, tenant_b, settings):
    """Effective, and whose: it changes only through ``manage.py tenant_storage_quota``."""
    settings.TENANT_ATTACHMENT_STORAGE_BYTES = 1024**3
    onboarding.tenant_storage_quota_set(slug=tenant_a.slug, quota_bytes=20 * 1024**3)

    listing = operator.get(TENANTS).content.decode()
    change = operator.get(f"{TENANTS}{tenant_a.pk}/change/").content.decode()

    assert "21474836480 bytes (20.0\xa0GB, its own quota)" in listing
    assert "1073741824 bytes (1.0\xa0GB, the deployment&#x27;s quota)" in listing
    assert "21474836480 bytes (20.0\xa0GB, its own quota)" in change
    assert 'name="attachment_storage_quota_bytes"' not in change


def suspend(client, *tenants, reason=None):
    data = {"action": "suspend", "_selected_action": [t.pk for t in tenants]}
    if reason is None:
        return client.post(TENANTS, {**data, "index": "0"})
    return client.post(TENANTS, {**data, "confirm": "yes", "reason": reason}, follow=True)


def test_the_suspend_action_asks_for_a_reason_then_suspends_each_tenant(
    operator, tenant_a, tenant_b
):
    onboarding.tenant_suspend(slug=tenant_b.slug, reason="earlier")

    asked = suspend(operator, tenant_a, tenant_b)
    blank = suspend(operator, tenant_a, tenant_b, reason="  ")
    statuses_after_blank = set(Tenant.objects.values_list("status", flat=True))
    done = suspend(operator, tenant_a, tenant_b, reason="Chargeback on invoice 88")

    assert asked.status_code == 200 and b'name="reason"' in asked.content
    assert blank.status_code == 200 and b"Say why the tenant is suspended." in blank.content
    assert statuses_after_blank == {"active", "suspended"}
    reported = [str(m) for m in done.context["messages"]]
    assert reported == [
        "Tenant A (tenant-a) is suspended.",
        "The tenant tenant-b is already suspended; nothing was changed.",
    ]
    assert Tenant.objects.get(pk=tenant_a.pk).status == "suspended"
    row = AuditEvent.objects.get(tenant=tenant_a, action="tenant.suspended")
    assert (row.actor.email, row.data) == (
        "ops@countersign.test",
        {"reason": "Chargeback on invoice 88", "sends_in_flight": 0},
    )
    assert AuditEvent.objects.filter(tenant=tenant_b, action="tenant.suspended").count() == 1


def test_the_suspend_action_says_which_sends_were_already_on_their_way(
    operator, tenant_a, mailbox_a, member_of
):
    """Counted in the audit row, and the operator was told only that the tenant was suspended."""
    from tests.intents.helpers import sends_in_flight

    sends_in_flight(mailbox_a, member_of(tenant_a, "approver").user, 1)

    done = suspend(operator, tenant_a, reason="Chargeback on invoice 88")

    assert [str(m) for m in done.context["messages"]] == [
        "Tenant A (tenant-a) is suspended. 1 send was already on its way and will go out; "
        "nothing else from this tenant will be sent."
    ]


def test_the_resume_action_resumes_each_suspended_tenant(operator, tenant_a, tenant_b):
    onboarding.tenant_suspend(slug=tenant_a.slug, reason="test")

    done = operator.post(
        TENANTS,
        {"action": "resume", "index": "0", "_selected_action": [tenant_a.pk, tenant_b.pk]},
        follow=True,
    )

    assert [str(m) for m in done.context["messages"]] == [
        "Tenant A (tenant-a) is active again.",
        "The tenant tenant-b is not suspended; nothing was changed.",
    ]
    assert set(Tenant.objects.values_list("status", flat=True)) == {"active"}
    row = AuditEvent.objects.get(action="tenant.resumed")
    assert (row.tenant, row.actor.email) == (tenant_a, "ops@countersign.test")


def test_a_staff_member_who_may_only_view_tenants_cannot_suspend(tenant_a):
    from django.contrib.auth.models import Permission

    viewer = User.objects.create_user("support@countersign.test", "viewer-pass-1", is_staff=True)
    viewer.user_permissions.add(Permission.objects.get(codename="view_tenant"))
    client = Client()
    client.force_login(viewer)

    listing = client.get(TENANTS)
    tried = suspend(client, tenant_a, reason="not mine to do")

    assert listing.status_code == 200 and b'value="suspend"' not in listing.content
    assert tried.status_code == 200
    assert Tenant.objects.get(pk=tenant_a.pk).status == "active"
    assert not AuditEvent.objects.exists()


USERS = "/ops/admin/tenants/user/"


def test_an_account_edit_here_is_in_the_audit_log_of_each_tenant_of_the_person(
    operator, tenant_a, tenant_b, member_of
):
    """An address changed here (the audit rows keep the address the person acted under, but the
    change itself must be on record) and an account switched off here (locked out of every
    tenant): neither left a row anywhere."""
    user = member_of(tenant_a).user
    member_of(tenant_b, "viewer", user=user)
    old_email = user.email
    admin_a = member_of(tenant_a, "admin").user

    response = operator.post(
        f"{USERS}{user.pk}/change/",
        {
            "email": "ana.new@example.test",
            "full_name": user.full_name,
            "is_active": "",
            "date_joined_0": user.date_joined.date().isoformat(),
            "date_joined_1": "00:00:00",
        },
    )

    assert response.status_code == 302
    rows = AuditEvent.objects.filter(action="user.changed_by_operator")
    assert sorted(rows.values_list("tenant_id", flat=True)) == [tenant_a.pk, tenant_b.pk]
    row = rows.get(tenant=tenant_a)
    assert (row.actor.email, row.object_id) == ("ops@countersign.test", str(user.pk))
    assert (row.data["before"]["email"], row.data["after"]["email"]) == (
        old_email,
        "ana.new@example.test",
    )
    assert (row.data["before"]["is_active"], row.data["after"]["is_active"]) == (True, False)
    page = Client()
    page.force_login(admin_a)
    shown = page.get(reverse("admin_audit", args=[tenant_a.slug])).content.decode()
    assert "An operator changed the account of" in shown
    assert f"{old_email} → ana.new@example.test" in shown


def test_a_password_set_here_ends_the_persons_sessions_and_is_audited(
    operator, tenant_a, member_of, password
):
    user = member_of(tenant_a).user
    theirs = Client()
    theirs.post(reverse("login"), {"username": user.email, "password": password})

    response = operator.post(
        f"{USERS}{user.pk}/password/",
        {"password1": PASSWORD, "password2": PASSWORD, "usable_password": "true"},
    )

    assert response.status_code == 302
    user.refresh_from_db()
    assert user.check_password(PASSWORD)
    assert theirs.get(reverse("tenant_home", args=[tenant_a.slug])).status_code == 302
    row = AuditEvent.objects.get(action="signin.password_operator_set")
    assert (row.tenant, row.actor.email, row.data["sessions_ended"]) == (
        tenant_a,
        "ops@countersign.test",
        1,
    )


def _switch(operator, user, *, on: bool):
    return operator.post(
        f"{USERS}{user.pk}/change/",
        {
            "email": user.email,
            "full_name": user.full_name,
            "is_active": "on" if on else "",
            "date_joined_0": user.date_joined.date().isoformat(),
            "date_joined_1": "00:00:00",
        },
    )


def test_an_account_switched_off_here_is_signed_out_for_good(
    operator, tenant_a, member_of, password
):
    """Switching an account off is how an operator shuts out whoever holds its sessions (a
    stolen cookie, a lost laptop). Its sessions were kept, only unusable while it was off:
    switched on again, every one of them opened the tenants again, past the second factor it
    had proven, and the holder of the stolen cookie was back in."""
    user = member_of(tenant_a).user
    theirs = Client()
    theirs.post(reverse("login"), {"username": user.email, "password": password})
    home = reverse("tenant_home", args=[tenant_a.slug])
    assert theirs.get(home).status_code == 200

    assert _switch(operator, user, on=False).status_code == 302
    user.refresh_from_db()
    assert _switch(operator, user, on=True).status_code == 302

    assert theirs.get(home).status_code == 302
    assert not UserSession.objects.filter(user=user).exists()
    row = AuditEvent.objects.filter(action="user.changed_by_operator").order_by("pk").first()
    assert row.data["sessions_ended"] == 1


def test_people_and_agent_tokens_cannot_be_deleted_here(operator, tenant_a, member_of):
    """The journals name the person or token that acted: deleting one who had acted failed on
    them with a 500, and deleting one who had not took their memberships along, unaudited."""
    membership = member_of(tenant_a)
    token, _ = token_create(tenant=tenant_a, name="bot", scopes=["drafts:read"], actor=None)

    answers = [
        operator.get(f"{USERS}{membership.user.pk}/delete/").status_code,
        operator.post(f"{USERS}{membership.user.pk}/delete/", {"post": "yes"}).status_code,
        operator.post(
            f"/ops/admin/tenants/agenttoken/{token.pk}/delete/", {"post": "yes"}
        ).status_code,
    ]

    assert answers == [403, 403, 403]
    assert User.objects.filter(pk=membership.user.pk).exists()
    assert tenant_a.memberships.filter(pk=membership.pk).exists()
    assert tenant_a.agent_tokens.filter(pk=token.pk).exists()


def test_invitations_cannot_be_deleted_here(operator, tenant_a, member_of):
    """Deleting a pending invitation here withdrew it without an audit row (revoking it on the
    members page records who did); a closed one is how a member came in."""
    from tenants import invitations
    from tenants.models import Invitation

    admin = member_of(tenant_a, "admin").user
    invitation, _ = invitations.invitation_create(
        tenant=tenant_a, email="new@example.test", role="viewer", actor=admin
    )
    url = f"/ops/admin/tenants/invitation/{invitation.pk}/delete/"

    answers = [operator.get(url).status_code, operator.post(url, {"post": "yes"}).status_code]

    assert answers == [403, 403]
    assert Invitation.objects.get(pk=invitation.pk).state == "pending"


def test_a_token_or_invitation_digest_cannot_be_read_through_a_url_lookup(
    operator, tenant_a, member_of
):
    """Left off the pages, yet ``?digest__startswith=`` answered by its count of results: the
    whole digest came out sixteen guesses a character."""
    from tenants import invitations

    token, _ = token_create(tenant=tenant_a, name="bot", scopes=["drafts:read"], actor=None)
    invitation, _ = invitations.invitation_create(
        tenant=tenant_a,
        email="new@example.test",
        role="viewer",
        actor=member_of(tenant_a, "admin").user,
    )

    answers = [
        operator.get(
            "/ops/admin/tenants/agenttoken/", {"digest__startswith": token.digest[:2]}
        ).status_code,
        operator.get(
            "/ops/admin/tenants/invitation/", {"digest__startswith": invitation.digest[:2]}
        ).status_code,
    ]

    assert answers == [400, 400]


def test_a_staff_member_who_may_change_accounts_cannot_grant_access_or_take_over_a_superuser():
    from django.contrib.auth.models import Permission

    superuser = User.objects.create_superuser("root@countersign.test", "operator-pass-1")
    staff = User.objects.create_user("support@countersign.test", "staff-pass-1", is_staff=True)
    staff.user_permissions.set(Permission.objects.filter(codename__in=["view_user", "change_user"]))
    client = Client()
    client.force_login(staff)

    own = client.post(
        f"{USERS}{staff.pk}/change/",
        {
            "email": staff.email,
            "full_name": "",
            "is_active": "on",
            "is_staff": "on",
            "is_superuser": "on",
            "user_permissions": [p.pk for p in Permission.objects.all()],
            "date_joined_0": staff.date_joined.date().isoformat(),
            "date_joined_1": "00:00:00",
        },
    )
    takeover = client.post(
        f"{USERS}{superuser.pk}/password/",
        {"password1": PASSWORD, "password2": PASSWORD, "usable_password": "true"},
    )

    staff.refresh_from_db()
    superuser.refresh_from_db()
    assert own.status_code == 302
    assert (staff.is_superuser, staff.user_permissions.count()) == (False, 2)
    assert takeover.status_code == 403
    assert not superuser.check_password(PASSWORD)


def test_a_staff_member_who_may_change_groups_cannot_give_their_group_every_permission():
    """Another road to the same escalation: a group of theirs, given every permission."""
    from django.contrib.auth.models import Group, Permission

    staff = User.objects.create_user("support@countersign.test", "staff-pass-1", is_staff=True)
    staff.user_permissions.set(
        Permission.objects.filter(codename__in=["view_group", "change_group", "add_group"])
    )
    group = Group.objects.create(name="support")
    staff.groups.add(group)
    client = Client()
    client.force_login(staff)

    changed = client.post(
        f"/ops/admin/auth/group/{group.pk}/change/",
        {"name": "support", "permissions": [p.pk for p in Permission.objects.all()]},
    )
    added = client.get("/ops/admin/auth/group/add/")

    assert (changed.status_code, added.status_code) == (403, 403)
    assert group.permissions.count() == 0
    assert client.get(f"/ops/admin/auth/group/{group.pk}/change/").status_code == 200  # may look


def test_an_account_switched_off_here_holds_and_counts_the_sends_it_approved(
    operator, tenant_a, member_of, mailbox_factory
):
    """As a member's deactivation does (tenants.send_stops): the operator's switch-off of an
    account is a change that stops sends, and it said nothing of those already on their way."""
    from tests.intents.helpers import sends_in_flight

    approver = member_of(tenant_a, "approver").user
    sends_in_flight(mailbox_factory(tenant_a), approver, 2)

    response = operator.post(
        f"{USERS}{approver.pk}/change/",
        {
            "email": approver.email,
            "full_name": approver.full_name,
            "is_active": "",
            "date_joined_0": approver.date_joined.date().isoformat(),
            "date_joined_1": "00:00:00",
        },
    )

    assert response.status_code == 302
    row = AuditEvent.objects.get(action="user.changed_by_operator", tenant=tenant_a)
    assert row.data["sends_in_flight"] == 2


def test_a_change_here_from_a_stale_session_waits_for_a_proof(
    operator, tenant_a, member_of, settings
):
    """An outside probe's lead: a stolen operator cookie could set any account's password here
    (its own too, without the old one), raise an account to superuser or switch one on, with no
    recent proof of who is at the keyboard, which a tenant admin's lasting powers need. Any
    change here now does; reading and signing out do not."""
    from tests.tenants.test_sudo import age_proof

    user = member_of(tenant_a).user
    age_proof(operator, settings)
    url = f"{USERS}{user.pk}/password/"

    held = operator.post(
        url, {"password1": PASSWORD, "password2": PASSWORD, "usable_password": "true"}
    )
    read = operator.get(f"{USERS}{user.pk}/change/")

    assert held.status_code == 302
    assert held["Location"].startswith(reverse("account_confirm") + "?next=")
    user.refresh_from_db()
    assert not user.check_password(PASSWORD)
    assert read.status_code == 200
    assert operator.post(held["Location"], {"password": "operator-pass-1"}).status_code == 302
    done = operator.post(
        url, {"password1": PASSWORD, "password2": PASSWORD, "usable_password": "true"}
    )
    assert done.status_code == 302
    user.refresh_from_db()
    assert user.check_password(PASSWORD)
    age_proof(operator, settings)
    signed_out = operator.post("/ops/admin/logout/")
    assert signed_out.status_code == 302
    assert not signed_out["Location"].startswith(reverse("account_confirm"))
    assert "_auth_user_id" not in operator.session


def test_an_account_added_here_leaves_an_audit_row_naming_the_operator(operator):
    """Found by an outside probe: an account made with ``createsuperuser`` left a row, one added
    here (with a password the operator chose) left none."""
    assert add(operator, "carol@acme.test").status_code == 302
    carol = User.objects.get(email="carol@acme.test")

    row = AuditEvent.objects.get(action="user.created_by_operator")

    assert (row.tenant, row.actor.email, row.object_type, row.object_id) == (
        None,
        "ops@countersign.test",
        "user",
        str(carol.pk),
    )
    assert row.data == {"email": "carol@acme.test"}


def switch_off(operator, user, **extra):
    return operator.post(
        f"{USERS}{user.pk}/change/",
        {
            "email": user.email,
            "full_name": user.full_name,
            "is_active": "",
            "date_joined_0": user.date_joined.date().isoformat(),
            "date_joined_1": "00:00:00",
            **extra,
        },
    )


def test_switching_off_a_tenants_last_admin_asks_first_then_is_audited_in_that_tenant(
    operator, tenant_a, tenant_b, member_of
):
    """Found by the membership races probe: an operator switching off an account here had no
    last-admin check, and a tenant was left with no active admin, silently (a tenant's own
    admins are refused that). It is not refused here: an operator may have to lock out a
    compromised admin at once. The first save says which tenants would be left without an
    admin and changes nothing; a save that says so is done, warned and audited there."""
    admin = member_of(tenant_a, "admin").user
    member_of(tenant_b, "admin", user=admin)
    member_of(tenant_b, "admin")
    member_of(tenant_a, "admin", user__is_active=False)

    asked = switch_off(operator, admin)

    assert asked.status_code == 200
    errors = asked.context["adminform"].form.non_field_errors()
    assert len(errors) == 1 and "Tenant A" in errors[0] and "Tenant B" not in errors[0]
    assert 'name="leave_tenants_without_admin"' in asked.content.decode()
    admin.refresh_from_db()
    assert admin.is_active
    assert not AuditEvent.objects.filter(action="user.changed_by_operator").exists()

    done = switch_off(operator, admin, leave_tenants_without_admin="on")

    assert done.status_code == 302
    admin.refresh_from_db()
    assert not admin.is_active
    row = AuditEvent.objects.get(action="tenant.left_without_admin")
    assert (row.tenant, row.actor.email) == (tenant_a, "ops@countersign.test")
    assert row.data == {"email": admin.email}
    warned = [str(m) for m in operator.get(done["Location"]).context["messages"]]
    assert any("Tenant A" in m and "no active admin" in m for m in warned)


def test_switching_off_one_of_two_admins_asks_nothing(operator, tenant_a, member_of):
    admin = member_of(tenant_a, "admin").user
    member_of(tenant_a, "admin")

    assert switch_off(operator, admin).status_code == 302
    assert not AuditEvent.objects.filter(action="tenant.left_without_admin").exists()


@pytest.mark.django_db(transaction=True)
def test_two_operators_switching_off_a_tenants_two_admins_at_once_leave_it_one(
    operator, tenant_a, member_of
):
    """Each saw the other admin still active: without the membership rows locked, both saves
    went through and the tenant had no admin, unasked and unaudited."""
    from tests.intents.helpers import in_thread, until_done_or_waiting

    first, second = member_of(tenant_a, "admin").user, member_of(tenant_a, "admin").user
    other = Client()
    other.force_login(User.objects.create_superuser("ops2@countersign.test", "operator-pass-2"))
    outcomes: list[list] = [[], []]
    threads = []
    with transaction.atomic():
        list(Membership.objects.select_for_update().filter(tenant=tenant_a).order_by("pk"))
        for n, (client, user) in enumerate([(operator, first), (other, second)]):
            threads.append(in_thread(lambda c=client, u=user: switch_off(c, u), outcomes[n]))
            until_done_or_waiting(threads[-1], n + 1)
    for thread in threads:
        thread.join(20)

    assert sorted(outcome[0].status_code for outcome in outcomes) == [200, 302]
    assert User.objects.filter(pk__in=[first.pk, second.pk], is_active=True).count() == 1
