"""Invitations through the pages, tried as outsiders: another tenant's admin, a user of two tenants,
a replayed, revoked or expired link, the wrong person signed in."""

import re
from datetime import timedelta

import pytest
from django.urls import reverse

from tenants.models import AuditEvent, Invitation, Membership, User

pytestmark = pytest.mark.django_db

NEW_PASSWORD = "a-long-enough-pass-42"


def invite(client, admin, tenant, email, role="approver", **extra):
    client.force_login(admin.user)
    page = client.post(
        reverse("admin_members", args=[tenant.slug]), {"email": email, "role": role, **extra}
    )
    client.logout()
    return page


def create_account(client, link, password=NEW_PASSWORD):
    page = client.get(link)
    return client.post(page["Location"], {"new_password1": password, "new_password2": password})


def result_box(page) -> str:
    """The box that answers the invite (the rest of the page lists this tenant's invitations)."""
    html = page.content.decode()
    start = html.index('<div class="ok-box" role="status">')
    return html[start : html.index("</div>", start)]


def sign_in(client, email, password=NEW_PASSWORD):
    return client.post(reverse("login"), {"username": email, "password": password})


def test_another_tenants_admin_cannot_take_over_a_pending_invitee(
    tenant_a, tenant_b, member_of, client
):
    """Globex (B) invites new.cfo as admin; Acme's (A) admin invites the same address, follows his
    own link and chooses the password: he owns an account of Acme's, nothing of Globex's."""
    globex_admin = member_of(tenant_b, "admin")
    acme_admin = member_of(tenant_a, "admin")
    invite(client, globex_admin, tenant_b, "new.cfo@globex.test", role="admin")
    link = invite(client, acme_admin, tenant_a, "new.cfo@globex.test").context["link"]
    create_account(client, link)
    sign_in(client, "new.cfo@globex.test")
    assert client.get(reverse("tenant_home", args=[tenant_b.slug])).status_code == 404
    assert client.get(reverse("admin_home", args=[tenant_b.slug])).status_code == 404
    assert not Membership.objects.filter(tenant=tenant_b, user__email="new.cfo@globex.test")
    assert b"Tenant B" not in client.get(reverse("home"), follow=True).content


def test_the_inviting_admin_gets_the_same_answer_whatever_the_address(
    tenant_a, tenant_b, member_of, client
):
    elsewhere = member_of(tenant_b, "viewer").user.email
    acme_admin = member_of(tenant_a, "admin")
    pages = {
        email: invite(client, acme_admin, tenant_a, email)
        for email in ("nobody.yet@example.test", elsewhere)
    }
    shown = {
        email: result_box(page)
        .replace(email, "EMAIL")
        .replace(page.context["link"] or "\0", "LINK")
        for email, page in pages.items()
    }
    assert all(page.status_code == 200 for page in pages.values())
    assert shown["nobody.yet@example.test"] == shown[elsewhere]
    rows = AuditEvent.objects.filter(tenant=tenant_a).order_by("id")
    first, second = (sorted(row.data) for row in rows)
    assert first == second
    assert all("new_user" not in row.data for row in rows)


def test_inviting_a_user_of_another_tenant_adds_nothing_until_they_accept(
    tenant_a, tenant_b, member_of, client
):
    globex_viewer = member_of(tenant_b, "viewer")
    acme_admin = member_of(tenant_a, "admin")
    invite(client, acme_admin, tenant_a, globex_viewer.user.email, role="admin")
    assert not Membership.objects.filter(tenant=tenant_a, user=globex_viewer.user).exists()
    assert list(globex_viewer.user.memberships.values_list("tenant__slug", flat=True)) == [
        tenant_b.slug
    ]
    assert User.objects.get(pk=globex_viewer.user.pk).check_password("correct-horse-battery-staple")


def members_url(tenant):
    return reverse("admin_members", args=[tenant.slug])


def test_an_existing_account_signs_in_then_accepts_with_the_rights_offered(
    tenant_a, tenant_b, member_of, client, password
):
    from tests.factories import make_local_mailbox

    refunds = make_local_mailbox(tenant_a, username="refunds")
    make_local_mailbox(tenant_a, username="sales")
    globex_viewer = member_of(tenant_b, "viewer").user
    acme_admin = member_of(tenant_a, "admin")
    link = invite(
        client,
        acme_admin,
        tenant_a,
        globex_viewer.email.upper(),
        approve="some",
        mailboxes=[refunds.pk],
    ).context["link"]
    opened = client.get(link, follow=True)
    assert opened.status_code == 200 and b"Sign in" in opened.content
    invitation = Invitation.objects.get(tenant=tenant_a)
    assert f"?next=/invitations/{invitation.pk}/".encode() in opened.content
    refused = client.post(
        opened.redirect_chain[-1][0],
        {"new_password1": NEW_PASSWORD, "new_password2": NEW_PASSWORD},
    )
    assert (refused.status_code, refused["Location"]) == (302, reverse("login"))
    assert User.objects.get(pk=globex_viewer.pk).check_password(password)
    assert not Membership.objects.filter(tenant=tenant_a, user=globex_viewer).exists()
    home = client.post(
        reverse("login"), {"username": globex_viewer.email, "password": password}, follow=True
    )
    assert b"Invitations waiting for you" in home.content and b"Tenant A" in home.content
    accepted = client.post(reverse("invitation_accept", args=[invitation.pk]))
    assert accepted.status_code == 302
    assert accepted["Location"] == reverse("tenant_home", args=[tenant_a.slug])
    membership = Membership.objects.get(tenant=tenant_a, user=globex_viewer)
    assert (membership.role, membership.approve_all_mailboxes) == ("approver", False)
    assert list(membership.approve_mailboxes.all()) == [refunds]
    row = AuditEvent.objects.get(tenant=tenant_a, action="invitation.accepted")
    assert row.actor == globex_viewer
    assert row.data == {
        "email": globex_viewer.email,
        "role": "approver",
        "membership_id": membership.pk,
    }
    assert tenant_b.slug not in str(AuditEvent.objects.filter(tenant=tenant_a).values())
    assert client.get(link).status_code == 410


def test_holding_the_address_without_the_link_accepts_nothing(
    tenant_a, tenant_b, member_of, client, password
):
    """The account exists (another tenant's admin may have created it through his own link), but
    this session never opened B's link: B's invitation is neither listed nor acceptable."""
    person = member_of(tenant_a, "viewer").user
    invite(client, member_of(tenant_b, "admin"), tenant_b, person.email, role="admin")
    invitation = Invitation.objects.get(tenant=tenant_b)
    client.post(reverse("login"), {"username": person.email, "password": password})
    assert client.get(reverse("home")).status_code == 302  # one tenant, nothing pending
    for action in ("invitation_accept", "invitation_decline"):
        forged = client.post(reverse(action, args=[invitation.pk]))
        assert forged.status_code == 403 and b"Open the invitation link" in forged.content
    assert Invitation.objects.get(pk=invitation.pk).state == "pending"
    assert not Membership.objects.filter(tenant=tenant_b, user=person).exists()


def test_accepting_while_signed_in_as_someone_else_is_refused(
    tenant_a, tenant_b, member_of, client, password
):
    invited = member_of(tenant_b, "viewer").user
    other = member_of(tenant_b, "approver").user
    link = invite(client, member_of(tenant_a, "admin"), tenant_a, invited.email).context["link"]
    invitation = Invitation.objects.get(tenant=tenant_a)
    client.get(link)  # opened while signed out: the session holds it...
    client.post(reverse("login"), {"username": other.email, "password": password})
    refused = client.post(reverse("invitation_accept", args=[invitation.pk]))
    assert refused.status_code == 403 and invited.email.encode() in refused.content
    page = client.get(link, follow=True)  # ...and opened while signed in as the wrong person
    assert page.status_code == 403 and b"sign out" in page.content
    assert b"Invitations waiting" not in client.get(reverse("home"), follow=True).content
    assert not Membership.objects.filter(tenant=tenant_a).exclude(role="admin").exists()
    assert Invitation.objects.get(pk=invitation.pk).state == "pending"


def test_decline_closes_the_invitation_and_adds_nothing(
    tenant_a, tenant_b, member_of, client, password
):
    person = member_of(tenant_b, "viewer").user
    link = invite(client, member_of(tenant_a, "admin"), tenant_a, person.email).context["link"]
    client.force_login(person)
    assert b"Decline" in client.get(link, follow=True).content
    invitation = Invitation.objects.get(tenant=tenant_a)
    declined = client.post(reverse("invitation_decline", args=[invitation.pk]))
    assert declined.status_code == 302
    assert Invitation.objects.get(pk=invitation.pk).state == "declined"
    assert not Membership.objects.filter(tenant=tenant_a, user=person).exists()
    assert client.post(reverse("invitation_accept", args=[invitation.pk])).status_code == 403
    assert client.get(link).status_code == 410
    assert AuditEvent.objects.filter(tenant=tenant_a, action="invitation.declined").count() == 1


def test_revoked_expired_replaced_and_unknown_links_do_not_work(
    tenant_a, member_of, signed_in, client
):
    from django.db.models.functions import Now

    admin = member_of(tenant_a, "admin")
    revoked = invite(client, admin, tenant_a, "revoked@example.test").context["link"]
    expired = invite(client, admin, tenant_a, "expired@example.test").context["link"]
    replaced = invite(client, admin, tenant_a, "again@example.test").context["link"]
    fresh = invite(client, admin, tenant_a, "again@example.test").context["link"]
    Invitation.objects.filter(email="expired@example.test").update(
        expires_at=Now() - timedelta(minutes=1)
    )
    signed_in(admin.user).post(
        reverse(
            "admin_invitation_revoke",
            args=[tenant_a.slug, Invitation.objects.get(email="revoked@example.test").pk],
        )
    )
    client.logout()
    answers = {
        name: client.get(link)
        for name, link in {
            "revoked": revoked,
            "expired": expired,
            "replaced": replaced,
            "unknown": "/invitations/" + "A" * 43 + "/",
            "malformed": "/invitations/not-a-token/",
        }.items()
    }
    assert {name: page.status_code for name, page in answers.items()} == {
        "revoked": 410,
        "expired": 410,
        "replaced": 410,
        "unknown": 404,
        "malformed": 404,
    }
    assert b"expired" in answers["expired"].content
    assert b"withdrawn or replaced" in answers["revoked"].content
    assert not User.objects.filter(
        email__in=["revoked@example.test", "expired@example.test", "again@example.test"]
    ).exists()
    assert client.get(fresh, follow=True).status_code == 200
    states = dict(Invitation.objects.values_list("email", "state").order_by("id")[:3])
    assert states == {
        "revoked@example.test": "revoked",
        "expired@example.test": "pending",
        "again@example.test": "revoked",
    }
    assert list(
        AuditEvent.objects.filter(action="invitation.revoked")
        .order_by("id")
        .values_list("data__reason", flat=True)
    ) == ["replaced", "revoked"]


def test_admin_lists_pending_and_expired_invitations_and_revokes_once(
    tenant_a, tenant_b, member_of, signed_in, client
):
    from django.db.models.functions import Now

    admin = member_of(tenant_a, "admin")
    invite(client, admin, tenant_a, "pending@example.test")
    invite(client, admin, tenant_a, "late@example.test")
    invite(client, member_of(tenant_b, "admin"), tenant_b, "theirs@example.test")
    Invitation.objects.filter(email="late@example.test").update(
        expires_at=Now() - timedelta(days=1)
    )
    client = signed_in(admin.user)
    page = client.get(members_url(tenant_a))
    listed = {inv.email: inv.is_expired for inv in page.context["invitations"]}
    assert listed == {"pending@example.test": False, "late@example.test": True}
    assert b"expired" in page.content and b"theirs@example.test" not in page.content
    pending = Invitation.objects.get(email="pending@example.test")
    url = reverse("admin_invitation_revoke", args=[tenant_a.slug, pending.pk])
    client.post(url)
    twice = client.post(url, follow=True)
    assert b"This invitation was already revoked." in twice.content
    assert Invitation.objects.get(pk=pending.pk).state == "revoked"
    assert AuditEvent.objects.filter(tenant=tenant_a, action="invitation.revoked").count() == 1


def test_revoking_a_closed_invitation_says_what_became_of_it_in_a_sentence(
    tenant_a, tenant_b, member_of
):
    """The refusal read "This invitation was already Accepted.", the state's label as a word."""
    from tenants import invitations
    from tenants.services import AdminError

    admin = member_of(tenant_a, "admin").user
    person = member_of(tenant_b, "viewer").user
    taken, _ = invitations.invitation_create(
        tenant=tenant_a, email=person.email, role="viewer", actor=admin
    )
    invitations.invitation_accept(invitation_id=taken.pk, user=person)
    other = member_of(tenant_b, "viewer").user
    turned_down, _ = invitations.invitation_create(
        tenant=tenant_a, email=other.email, role="viewer", actor=admin
    )
    invitations.invitation_decline(invitation_id=turned_down.pk, user=other)
    refusals = []
    for invitation in (taken, turned_down):
        with pytest.raises(AdminError) as refused:
            invitations.invitation_revoke(tenant=tenant_a, invitation_id=invitation.pk, actor=admin)
        refusals.append(refused.value.message)
    assert refusals == [
        "This invitation was already accepted.",
        "This invitation was already declined.",
    ]


def test_invite_naming_another_tenants_mailbox_is_refused_and_creates_nothing(
    tenant_a, tenant_b, member_of, client
):
    from tests.factories import make_local_mailbox

    theirs = make_local_mailbox(tenant_b)
    page = invite(
        client,
        member_of(tenant_a, "admin"),
        tenant_a,
        "new@example.test",
        approve="some",
        mailboxes=[theirs.pk],
    )
    assert page.status_code == 400
    assert not Invitation.objects.exists()


def test_a_user_of_two_tenants_accepts_a_third_and_keeps_both(
    tenant_a, tenant_b, member_of, client, password
):
    from tests.factories import TenantFactory

    tenant_c = TenantFactory(name="Tenant C", slug="tenant-c")
    person = member_of(tenant_a, "viewer").user
    member_of(tenant_b, "admin", user=person)
    link = invite(client, member_of(tenant_c, "admin"), tenant_c, person.email).context["link"]
    client.get(link)
    client.post(reverse("login"), {"username": person.email, "password": password})
    home = client.get(reverse("home"))
    assert [inv.tenant for inv in home.context["invitations"]] == [tenant_c]
    invitation = home.context["invitations"][0]
    client.post(reverse("invitation_accept", args=[invitation.pk]))
    assert sorted(person.memberships.values_list("tenant__slug", "role")) == [
        ("tenant-a", "viewer"),
        ("tenant-b", "admin"),
        ("tenant-c", "approver"),
    ]
    audit_c = list(AuditEvent.objects.filter(tenant=tenant_c).values("action", "data"))
    assert "tenant-a" not in str(audit_c) and "tenant-b" not in str(audit_c)
    assert "Tenant A" not in str(audit_c) and "Tenant B" not in str(audit_c)


def test_the_services_refuse_expired_and_revoked_invitations_on_their_own(
    tenant_a, tenant_b, member_of
):
    """The guard is the conditional UPDATE in the service, not the page in front of it."""
    from django.db.models.functions import Now

    from tenants import invitations
    from tenants.services import AdminError

    admin = member_of(tenant_a, "admin").user
    person = member_of(tenant_b, "viewer").user
    late, _ = invitations.invitation_create(
        tenant=tenant_a, email="late@example.test", role="admin", actor=admin
    )
    Invitation.objects.filter(pk=late.pk).update(expires_at=Now() - timedelta(seconds=1))
    withdrawn, _ = invitations.invitation_create(
        tenant=tenant_a, email=person.email, role="admin", actor=admin
    )
    invitations.invitation_revoke(tenant=tenant_a, invitation_id=withdrawn.pk, actor=admin)
    with pytest.raises(AdminError) as expired:
        invitations.invitation_accept_with_new_account(invitation_id=late.pk, password=NEW_PASSWORD)
    with pytest.raises(AdminError) as revoked:
        invitations.invitation_accept(invitation_id=withdrawn.pk, user=person)
    assert (expired.value.code, revoked.value.code) == ("expired", "revoked")
    assert not User.objects.filter(email="late@example.test").exists()
    assert not Membership.objects.filter(tenant=tenant_a).exclude(user=admin).exists()


def test_a_suspended_tenant_takes_no_new_members(tenant_a, member_of, client):
    from tenants.models import Tenant

    link = invite(client, member_of(tenant_a, "admin"), tenant_a, "late@example.test").context[
        "link"
    ]
    Tenant.objects.filter(pk=tenant_a.pk).update(status="suspended")
    page = create_account(client, link)
    assert page.status_code == 400 and b"suspended" in page.content
    assert not User.objects.filter(email="late@example.test").exists()
    assert Invitation.objects.get(tenant=tenant_a).state == "pending"


def test_a_suspended_tenant_takes_no_decline_either(tenant_a, tenant_b, member_of, client):
    """Accepting is refused while the tenant is suspended; declining went through and wrote an
    audit row into the suspended tenant."""
    from tenants.models import Tenant

    person = member_of(tenant_b, "viewer").user
    link = invite(client, member_of(tenant_a, "admin"), tenant_a, person.email).context["link"]
    client.force_login(person)
    client.get(link)
    invitation = Invitation.objects.get(tenant=tenant_a)
    Tenant.objects.filter(pk=tenant_a.pk).update(status="suspended")

    declined = client.post(reverse("invitation_decline", args=[invitation.pk]))
    accepted = client.post(reverse("invitation_accept", args=[invitation.pk]))

    assert "Tenant A is suspended, so this invitation cannot be declined now" in (
        declined.content.decode()
    )
    assert declined.status_code == accepted.status_code
    assert b"suspended" in accepted.content
    assert Invitation.objects.get(pk=invitation.pk).state == "pending"
    assert not AuditEvent.objects.filter(tenant=tenant_a, action="invitation.declined").exists()


def test_the_invitee_pages_refuse_a_post_without_csrf_token(tenant_a, tenant_b, member_of):
    from django.test import Client

    person = member_of(tenant_b, "viewer").user
    link = invite(Client(), member_of(tenant_a, "admin"), tenant_a, person.email).context["link"]
    client = Client(enforce_csrf_checks=True)
    client.force_login(person)
    invitation = Invitation.objects.get(tenant=tenant_a)
    client.get(link)
    statuses = [
        client.post(reverse(name, args=[invitation.pk])).status_code
        for name in ("invitation", "invitation_accept", "invitation_decline")
    ]
    assert statuses == [403, 403, 403]
    assert Invitation.objects.get(pk=invitation.pk).state == "pending"
    assert not Membership.objects.filter(tenant=tenant_a, user=person).exists()


@pytest.mark.parametrize("change", ["demoted", "deactivated"])
def test_an_admins_pending_invitations_go_when_they_stop_being_admin(tenant_a, member_of, change):
    """Found by an outside probe: an admin could invite a private address as admin, keep the
    link, and after being demoted or deactivated accept it and be an admin again."""
    from tenants import invitations, services

    leaving = member_of(tenant_a, "admin")
    other = member_of(tenant_a, "admin").user
    invitation, _link = invitations.invitation_create(
        tenant=tenant_a, email="m.private@example.com", role="admin", actor=leaving.user
    )
    if change == "demoted":
        services.member_set_role(
            tenant=tenant_a, membership_id=leaving.pk, role="viewer", actor=other
        )
    else:
        services.member_deactivate(tenant=tenant_a, membership_id=leaving.pk, actor=other)

    invitation.refresh_from_db()
    assert invitation.state == "revoked"
    assert AuditEvent.objects.filter(
        tenant=tenant_a, action="invitation.revoked", object_id=str(invitation.pk)
    ).exists()


def test_a_link_whose_inviter_is_no_longer_an_admin_makes_nobody_a_member(
    tenant_a, tenant_b, member_of, client
):
    """An invitation that outlived its inviter's admin role (written while the demotion was
    under way, before the write re-checked the role): the link is the inviter's offer as an
    admin and no longer works, for a new account as for an existing one."""
    from tenants import invitations

    inviter = member_of(tenant_a, "admin")
    member_of(tenant_a, "admin")
    existing = member_of(tenant_b, "viewer").user
    new, _ = invitations.invitation_create(
        tenant=tenant_a, email="second-account@example.test", role="admin", actor=inviter.user
    )
    link = invite(client, inviter, tenant_a, existing.email, role="admin").context["link"]
    Membership.objects.filter(pk=inviter.pk).update(role="viewer")

    with pytest.raises(invitations.AdminError) as refused:
        invitations.invitation_accept_with_new_account(invitation_id=new.pk, password=NEW_PASSWORD)
    client.get(link)
    client.force_login(existing)
    theirs = Invitation.objects.get(email=existing.email)
    page = client.post(reverse("invitation_accept", args=[theirs.pk]))

    assert refused.value.code == "inviter_not_admin"
    assert "Ask an admin of Tenant A for a new invitation." in refused.value.message
    assert page.status_code == 410 and b"no longer an admin of Tenant A" in page.content
    assert not User.objects.filter(email="second-account@example.test").exists()
    assert not Membership.objects.filter(tenant=tenant_a, user=existing).exists()
    assert set(Invitation.objects.filter(tenant=tenant_a).values_list("state", flat=True)) == {
        "pending"
    }


UNSAFE_NAMES = pytest.mark.parametrize(
    "name",
    ["Eve\u202egnp.exe", "Eve\x1b[31m", "Eve\u2066Mallory", "Eve\tMallory"],
    ids=["rlo", "esc", "isolate", "tab"],
)


@UNSAFE_NAMES
def test_the_invitee_cannot_choose_a_name_that_reads_as_something_else(
    client, tenant_a, member_of, name
):
    """Found by an outside probe: every admin and approver of the tenant reads a member's name
    (member list, approvals, audit); the rule for names others read is common.text's
    unsafe_in_name, as for tokens, passkeys and inboxes."""
    link = invite(client, member_of(tenant_a, "admin"), tenant_a, "newbie@example.test")
    page = client.get(link.context["link"])

    response = client.post(
        page["Location"],
        {"full_name": name, "new_password1": NEW_PASSWORD, "new_password2": NEW_PASSWORD},
    )

    assert response.status_code == 400
    assert "A name cannot hold the control character" in response.content.decode()
    assert Invitation.objects.get(email="newbie@example.test").state == "pending"
    assert not User.objects.filter(email="newbie@example.test").exists()


@UNSAFE_NAMES
def test_the_admin_cannot_invite_under_a_name_that_reads_as_something_else(
    client, tenant_a, member_of, name
):
    page = invite(
        client, member_of(tenant_a, "admin"), tenant_a, "named@example.test", full_name=name
    )

    assert page.status_code == 400
    assert "A name cannot hold the control character" in page.content.decode()
    assert not Invitation.objects.filter(email="named@example.test").exists()


def visible(html: str) -> str:
    """What a page shows under its top bar (the flash and the main part), without the per-request
    CSRF token and script nonce, and the minute the link expires."""
    shown = html[html.index("</header>") : html.index("</main>")]
    shown = re.sub(r'(name="csrfmiddlewaretoken" value|nonce)="[^"]*"', "", shown)
    return re.sub(r"until [^.<]*\.", "until WHEN.", shown)


def test_the_link_looks_the_same_whether_or_not_the_address_has_an_account(
    tenant_a, tenant_b, member_of, client, password
):
    """The admin who makes a link holds it too: a page (or an answer to its form) that differed
    for an address with an account told Acme's admin who has an account here, in any tenant,
    which the invite page itself never tells. Only signing in as the account shows it."""
    elsewhere = member_of(tenant_b, "viewer").user
    acme_admin = member_of(tenant_a, "admin")
    shown = {}
    for email in ("nobody.yet@example.test", elsewhere.email):
        link = invite(client, acme_admin, tenant_a, email).context["link"]
        page = client.get(link, follow=True)
        url = page.redirect_chain[-1][0]
        posted = client.post(url, {"new_password1": NEW_PASSWORD, "new_password2": NEW_PASSWORD})
        answer = client.get(posted["Location"])
        shown[email] = [
            visible(text).replace(email, "EMAIL").replace(url, "URL")
            for text in (page.content.decode(), answer.content.decode())
        ] + [posted.status_code, posted["Location"]]
        client.cookies.clear()

    assert shown["nobody.yet@example.test"] == shown[elsewhere.email]
    assert elsewhere.check_password(password)
    assert not Membership.objects.filter(tenant=tenant_a, user=elsewhere).exists()


def test_the_sign_in_page_after_a_new_account_offers_the_invitations_address_only(
    tenant_a, member_of, client
):
    """The invitee was just told "now sign in as new.agent@...": the address is filled in (from
    the session the invitation page wrote, never from the URL) and the password has the focus.
    A stranger's link with the address in its query fills in nothing."""
    acme_admin = member_of(tenant_a, "admin")
    link = invite(client, acme_admin, tenant_a, "new.agent@example.test").context["link"]
    created = create_account(client, link)
    page = client.get(created["Location"])
    form = page.context["form"]
    assert (created["Location"], form["username"].value()) == (
        reverse("login"),
        "new.agent@example.test",
    )
    assert "autofocus" in form.fields["password"].widget.attrs
    assert 'value="new.agent@example.test"' in page.content.decode()

    sign_in(client, "new.agent@example.test")
    client.logout()
    after = client.get(reverse("login") + "?username=mallory@evil.test&email=mallory@evil.test")
    assert after.context["form"]["username"].value() is None
    assert "mallory" not in after.content.decode()
