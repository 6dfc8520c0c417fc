"""A person's sessions: listed, ended one by one (never someone else's), all ended when an admin
deactivates the member, and signed out at their very next request."""

import pytest
from django.contrib.sessions.models import Session
from django.test import Client
from django.urls import reverse

from tenants import services
from tenants.models import AuditEvent, UserSession

pytestmark = pytest.mark.django_db


def browser(user, password, agent, ip="10.1.0.1"):
    client = Client(HTTP_USER_AGENT=agent, REMOTE_ADDR=ip)
    response = client.post(reverse("login"), {"username": user.email, "password": password})
    assert response.status_code == 302
    return client


def test_sessions_are_listed_with_browser_and_address(tenant_a, member_of, password):
    user = member_of(tenant_a).user
    laptop = browser(user, password, "Laptop Firefox", "10.1.0.1")
    browser(user, password, "Phone Safari", "10.1.0.2")
    page = laptop.get(reverse("sessions"))
    assert page.status_code == 200
    rows = {(s.user_agent, s.ip_address, s.method) for s in page.context["sessions"]}
    assert rows == {
        ("Laptop Firefox", "10.1.0.1", "password"),
        ("Phone Safari", "10.1.0.2", "password"),
    }
    assert b"This session" in page.content


def test_ending_another_session_signs_that_browser_out(tenant_a, member_of, password):
    user = member_of(tenant_a).user
    laptop = browser(user, password, "Laptop")
    phone = browser(user, password, "Phone")
    phone_row = UserSession.objects.get(user=user, user_agent="Phone")
    response = laptop.post(reverse("session_end", args=[phone_row.pk]))
    assert response.status_code == 302
    assert not Session.objects.filter(session_key=phone_row.session_key).exists()
    assert phone.get(reverse("tenant_home", args=[tenant_a.slug])).status_code == 302
    assert laptop.get(reverse("tenant_home", args=[tenant_a.slug])).status_code == 200
    assert AuditEvent.objects.filter(action="signin.session_ended", tenant=tenant_a).count() == 1


def test_the_current_session_is_not_ended_from_the_list(tenant_a, member_of, password):
    user = member_of(tenant_a).user
    laptop = browser(user, password, "Laptop")
    own = UserSession.objects.get(user=user)
    laptop.post(reverse("session_end", args=[own.pk]))
    assert laptop.get(reverse("tenant_home", args=[tenant_a.slug])).status_code == 200


def test_another_persons_session_answers_like_a_missing_one(
    tenant_a, tenant_b, member_of, password
):
    mallory = member_of(tenant_a).user
    victim = member_of(tenant_b).user
    attacker = browser(mallory, password, "Attacker")
    victims = browser(victim, password, "Victim")
    row = UserSession.objects.get(user=victim)
    foreign = attacker.post(reverse("session_end", args=[row.pk]))
    missing = attacker.post(reverse("session_end", args=[987654321]))
    assert foreign.status_code == missing.status_code == 404
    assert victims.get(reverse("tenant_home", args=[tenant_b.slug])).status_code == 200
    listed = attacker.get(reverse("sessions")).context["sessions"]
    assert {s.user_id for s in listed} == {mallory.pk}


def test_deactivation_ends_every_session_of_the_member_at_once(tenant_a, member_of, password):
    admin = member_of(tenant_a, "admin").user
    membership = member_of(tenant_a, "approver")
    laptop = browser(membership.user, password, "Laptop")
    phone = browser(membership.user, password, "Phone")
    bystander = browser(admin, password, "Admin laptop")
    services.member_deactivate(tenant=tenant_a, membership_id=membership.pk, actor=admin)
    for client in (laptop, phone):
        response = client.get(reverse("preferences"))
        assert response.status_code == 302 and response["Location"].startswith(reverse("login"))
    assert not UserSession.objects.filter(user=membership.user).exists()
    assert bystander.get(reverse("tenant_home", args=[tenant_a.slug])).status_code == 200
    row = AuditEvent.objects.get(action="member.deactivated")
    assert row.data["sessions_ended"] == 2


def test_deactivation_leaves_the_sessions_another_tenant_still_serves(
    tenant_a, tenant_b, member_of, password
):
    """Tenant A's admin cuts A's access at once, but the person's sessions serve tenant B too:
    A's admin must not be able to sign a member of B out of B (as often as they like, by
    deactivating and reactivating)."""
    admin = member_of(tenant_a, "admin").user
    membership = member_of(tenant_a, "approver")
    member_of(tenant_b, "viewer", user=membership.user)
    laptop = browser(membership.user, password, "Laptop")
    services.member_deactivate(tenant=tenant_a, membership_id=membership.pk, actor=admin)
    assert laptop.get(reverse("tenant_home", args=[tenant_b.slug])).status_code == 200
    assert laptop.get(reverse("tenant_home", args=[tenant_a.slug])).status_code == 404
    assert UserSession.objects.filter(user=membership.user).count() == 1
    row = AuditEvent.objects.get(action="member.deactivated")
    assert row.data["sessions_ended"] == 0


def test_a_session_without_a_record_is_signed_out(tenant_a, member_of, password):
    user = member_of(tenant_a).user
    client = browser(user, password, "Old browser")
    UserSession.objects.filter(user=user).delete()
    session = client.session
    session["cs_seen"] = "2000-01-01T00:00:00+00:00"
    session.save()
    response = client.get(reverse("tenant_home", args=[tenant_a.slug]))
    assert response.status_code == 302 and response["Location"].startswith(reverse("login"))
