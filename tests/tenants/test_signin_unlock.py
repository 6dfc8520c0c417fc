"""``manage.py signin_unlock``: an operator lifts a sign-in lock-out before its cool-off ends
(tenants.signin_lockouts.signin_lockout_release). The only way before was axes' own
``axes_reset*`` commands (or deleting the rows), which left no audit row; the admin shows axes'
rows read-only on purpose. The trace (axes' failure log) stays."""

import io
from datetime import timedelta

import pytest
import time_machine
from axes.models import AccessAttempt, AccessFailureLog
from django.core.management import CommandError, call_command
from django.test import Client
from django.urls import reverse
from django.utils import timezone

from tenants.models import AuditEvent
from tests.intents.helpers import run_concurrently

pytestmark = pytest.mark.django_db

HOME = "203.0.113.9"
OFFICE = "198.51.100.7"
RELEASED = "signin.lockout_released"


def sign_in(email, password, address):
    return Client().post(
        reverse("login"), {"username": email, "password": password}, REMOTE_ADDR=address
    )


def lock_out(email, address, settings):
    for _ in range(settings.AXES_FAILURE_LIMIT):
        sign_in(email, "not-the-password", address)


def unlock(*args) -> str:
    out = io.StringIO()
    call_command("signin_unlock", *args, stdout=out)
    return out.getvalue()


def attempts() -> list[tuple]:
    return sorted(
        AccessAttempt.objects.values_list("username", "ip_address", "failures_since_start")
    )


def test_an_operator_releases_every_lock_out_of_an_address_and_the_trace_stays(
    tenant_a, tenant_b, member_of, password, settings, signed_in
):
    person = member_of(tenant_a).user
    member_of(tenant_b, "viewer", user=person)
    admin = member_of(tenant_a, "admin").user
    lock_out(person.email, HOME, settings)
    lock_out(person.email, OFFICE, settings)
    locked = [sign_in(person.email, password, a).status_code for a in (HOME, OFFICE)]
    failures = AccessFailureLog.objects.count()

    said = unlock(person.email.upper())

    assert locked == [429, 429]
    assert f"released the sign-in lock-outs of {person.email} from 2 client address(es)" in said
    assert HOME in said and OFFICE in said
    assert AccessFailureLog.objects.count() == failures
    rows = AuditEvent.objects.filter(action=RELEASED)
    assert sorted(rows.values_list("tenant_id", flat=True)) == [tenant_a.pk, tenant_b.pk]
    row = rows.get(tenant=tenant_a)
    assert (row.object_type, row.object_id) == ("user", str(person.pk))
    assert row.data["ip_addresses"] == sorted([HOME, OFFICE])
    assert [sign_in(person.email, password, a).status_code for a in (HOME, OFFICE)] == [302, 302]
    page = signed_in(admin).get(reverse("admin_audit", args=[tenant_a.slug])).content.decode()
    assert "An operator released the sign-in lock-out of" in page
    assert f"<dt>IP addresses</dt><dd>{', '.join(sorted([HOME, OFFICE]))}</dd>" in page


def test_only_the_lock_out_from_one_client_address_is_released_with_ip(
    tenant_a, member_of, password, settings
):
    person = member_of(tenant_a).user
    lock_out(person.email, HOME, settings)
    lock_out(person.email, OFFICE, settings)

    said = unlock(person.email, "--ip", OFFICE)

    assert f"from 1 client address(es): {OFFICE}" in said
    assert sign_in(person.email, password, OFFICE).status_code == 302
    assert sign_in(person.email, password, HOME).status_code == 429
    row = AuditEvent.objects.get(action=RELEASED)
    assert row.data["ip_addresses"] == [OFFICE]


def test_a_lock_out_of_an_address_with_no_account_is_released_without_a_tenant(settings):
    """axes locks whatever address is typed: a stranger's lock-out on an address nobody has
    is released too, its row in no tenant."""
    lock_out("nobody@acme.test", HOME, settings)

    unlock("nobody@acme.test")

    assert attempts() == []
    row = AuditEvent.objects.get(action=RELEASED)
    assert (row.tenant, row.object_type, row.data["email"]) == (None, "", "nobody@acme.test")


def test_the_ip_may_be_given_in_its_dual_stack_form(tenant_a, member_of, password, settings):
    person = member_of(tenant_a).user
    lock_out(person.email, OFFICE, settings)

    unlock(person.email, "--ip", f"::ffff:{OFFICE}")

    assert sign_in(person.email, password, OFFICE).status_code == 302


def test_a_lock_out_past_its_cool_off_is_no_lock_out(tenant_a, member_of, settings):
    """axes no longer counts those failures: there is nothing to release, and no row says so."""
    person = member_of(tenant_a).user
    start = timezone.now()
    with time_machine.travel(start, tick=False):
        lock_out(person.email, HOME, settings)
    before = attempts()

    later = start + settings.AXES_COOLOFF_TIME + timedelta(seconds=1)
    with (
        time_machine.travel(later),
        pytest.raises(CommandError, match="has no sign-in lock-out; nothing was changed"),
    ):
        unlock(person.email)

    assert attempts() == before
    assert not AuditEvent.objects.filter(action=RELEASED).exists()


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["ana@acme.test"], "'ana@acme.test' has no sign-in lock-out; nothing was changed"),
        (["carl@acme.test"], "'carl@acme.test' has no sign-in lock-out; nothing was changed"),
        (
            ["ana@acme.test", "--ip", OFFICE],
            f"'ana@acme.test' has no sign-in lock-out from {OFFICE}; nothing was changed",
        ),
        (["bob@acme.test", "--ip", "203.0.113.999"], "'203.0.113.999' is not an IP address"),
        (["bob@acme.test", "--ip", "somewhere"], "'somewhere' is not an IP address"),
        (["bob@acme.test", "--ip", ""], "'' is not an IP address"),
    ],
    ids=["below-limit", "unknown", "other-ip", "bad-ip", "not-ip", "empty-ip"],
)
def test_a_refusal_changes_nothing_and_leaves_no_audit_row(args, message, settings):
    """Two failures of ana's (below the limit, not a lock-out) and a lock-out of bob's."""
    sign_in("ana@acme.test", "wrong", HOME)
    sign_in("ana@acme.test", "wrong", HOME)
    lock_out("bob@acme.test", HOME, settings)
    before = attempts()

    with pytest.raises(CommandError) as refused:
        unlock(*args)

    assert message in str(refused.value)
    assert refused.value.returncode == 1
    assert attempts() == before
    assert not AuditEvent.objects.filter(action=RELEASED).exists()


def test_a_client_the_server_gives_no_address_is_locked_out_and_released(
    tenant_a, member_of, password, settings
):
    """gunicorn bound to a unix socket (``GUNICORN_BIND=unix:...``) gives an empty REMOTE_ADDR.
    axes stored such a failure without an address but looked it up by the empty string, which
    matches no row: every failure made a new row, no lock-out ever came (guesses without end),
    and signin_unlock then "released" five rows that had locked nobody."""
    person = member_of(tenant_a).user
    lock_out(person.email, "", settings)

    locked = sign_in(person.email, password, "").status_code
    said = unlock(person.email)

    assert locked == 429
    assert attempts() == []
    assert "from 1 client address(es): unknown" in said
    assert sign_in(person.email, password, "").status_code == 302


@pytest.mark.parametrize(
    ("typed", "client", "given"),
    [
        # The sign-in form strips and lower-cases the address before axes keeps it.
        ("  {upper}  ", HOME, None),
        ("{email}", "2001:db8::1", "2001:DB8:0:0::1"),
        # axes locks an IPv6 client by its /64 (tenants.signin_throttle.lockout_client).
        ("{email}", "2001:db8::1", "2001:db8::ffff:2"),
        # A dual-stack socket reports an IPv4 client as ::ffff:a.b.c.d.
        ("{email}", f"::ffff:{OFFICE}", OFFICE),
        ("{email}", OFFICE, "::FFFF:c633:6407"),
    ],
    ids=["typed-spaced-upper", "ipv6", "ipv6-same-64", "mapped-client", "mapped-given"],
)
def test_the_lock_out_is_found_however_it_was_typed_or_the_client_reported(
    typed, client, given, tenant_a, member_of, password, settings
):
    person = member_of(tenant_a).user
    lock_out(typed.format(email=person.email, upper=person.email.upper()), client, settings)
    locked = sign_in(person.email, password, client).status_code

    said = unlock(person.email, *(["--ip", given] if given else []))

    assert locked == 429
    assert "from 1 client address(es)" in said
    assert attempts() == []
    assert sign_in(person.email, password, client).status_code == 302


@pytest.mark.django_db(transaction=True)
def test_of_operators_releasing_one_lock_out_at_once_one_does_the_others_are_refused(
    tenant_a, tenant_b, member_of, settings
):
    person = member_of(tenant_a).user
    member_of(tenant_b, "viewer", user=person)
    lock_out(person.email, HOME, settings)

    results = run_concurrently(lambda _: unlock(person.email), 4)

    assert sum(isinstance(r, str) for r in results) == 1
    refused = [r for r in results if isinstance(r, CommandError)]
    assert len(refused) == 3
    assert all("has no sign-in lock-out" in str(r) for r in refused)
    assert AuditEvent.objects.filter(action=RELEASED).count() == 2
