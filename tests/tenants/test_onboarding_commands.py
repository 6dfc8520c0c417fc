"""The operators' commands for tenants: ``tenant_create`` prints the first admin's link and no other
secret; ``tenant_invite_admin``, ``tenant_suspend`` and ``tenant_resume`` act through
tenants.onboarding; bad input is a CommandError naming the option, and nothing is written."""

import hashlib
import io
import re

import pytest
from django.core.management import CommandError, call_command

from tenants.models import AuditEvent, Invitation, Tenant, User

pytestmark = pytest.mark.django_db

LINK = re.compile(r"^https://cs\.example\.com/invitations/([A-Za-z0-9_-]{43})/$")


def run(*args) -> str:
    out = io.StringIO()
    call_command(*args, stdout=out, stderr=io.StringIO())
    return out.getvalue()


def create(*extra) -> str:
    return run(
        "tenant_create",
        "--name",
        "Acme Support",
        "--slug",
        "acme",
        "--admin-email",
        "ana@acme.test",
        *extra,
    )


def test_tenant_create_prints_the_link_on_the_public_address_and_no_other_secret(settings):
    settings.PUBLIC_BASE_URL = "https://cs.example.com/"

    out = create("--admin-name", "Ana Admin")

    lines = out.splitlines()
    token = LINK.match(lines[-1]).group(1)
    invitation = Invitation.objects.get(tenant__slug="acme")
    assert invitation.digest == hashlib.sha256(token.encode()).hexdigest()
    assert invitation.digest not in out
    assert len(lines) == 2 and "Acme Support (acme)" in lines[0] and "7 days" in lines[0]
    assert re.findall(r"[A-Za-z0-9_-]{32,}", out) == [token]
    assert (invitation.full_name, invitation.role, invitation.by_operator) == (
        "Ana Admin",
        "admin",
        True,
    )


BAD = [
    (("--slug", "Acme EU"), "--slug: A slug holds only lower-case letters"),
    (("--name", "  "), "--name: A tenant needs a name."),
    (("--admin-email", "ana-at-acme"), "--admin-email: Enter a valid email address."),
    (("--admin-name", "Ana\u202eEve"), "--admin-name: A name cannot hold the control character"),
    (("--name", "Acme\udcff"), "the byte 0xFF, which is not UTF-8"),
    (("--slug", "ac\x00me"), "it must be plain text but holds U+0000"),
]


@pytest.mark.parametrize(("override", "message"), BAD)
def test_tenant_create_refuses_bad_input_naming_the_option_and_writes_nothing(override, message):
    options = {"--name": "Acme", "--slug": "acme", "--admin-email": "ana@acme.test"}
    options[override[0]] = override[1]

    with pytest.raises(CommandError) as refused:
        run("tenant_create", *(part for pair in options.items() for part in pair))

    assert message in str(refused.value)
    assert (Tenant.objects.count(), Invitation.objects.count(), AuditEvent.objects.count()) == (
        0,
        0,
        0,
    )


def test_tenant_create_refuses_a_taken_slug_and_a_missing_option():
    create()

    with pytest.raises(CommandError) as taken:
        create()
    with pytest.raises(CommandError) as missing:
        run("tenant_create", "--name", "Globex", "--slug", "globex")

    assert str(taken.value) == "--slug: The slug acme is taken by another tenant."
    assert "--admin-email" in str(missing.value)
    assert Tenant.objects.count() == 1


def test_suspend_and_resume_by_command(tenant_a):
    suspended = run("tenant_suspend", tenant_a.slug, "--reason", "unpaid invoice")
    with pytest.raises(CommandError) as twice:
        run("tenant_suspend", tenant_a.slug, "--reason", "again")
    resumed = run("tenant_resume", tenant_a.slug)
    with pytest.raises(CommandError) as not_suspended:
        run("tenant_resume", tenant_a.slug)

    assert suspended == "suspended Tenant A (tenant-a)\n"
    assert resumed == "resumed Tenant A (tenant-a)\n"
    assert "already suspended; nothing was changed" in str(twice.value)
    assert "is not suspended; nothing was changed" in str(not_suspended.value)
    assert list(
        AuditEvent.objects.filter(tenant=tenant_a).order_by("id").values_list("action", "data")
    ) == [("tenant.suspended", {"reason": "unpaid invoice"}), ("tenant.resumed", {})]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("tenant_suspend", "tenant-a"), "--reason"),
        (("tenant_suspend", "tenant-a", "--reason", " "), "--reason: Say why the tenant is"),
        (("tenant_suspend", "nobody", "--reason", "x"), "No tenant has the slug nobody."),
        (("tenant_suspend", "tenant-a", "--reason", "a\x1bb"), "plain text but holds U+001B"),
        (("tenant_resume", "nobody"), "No tenant has the slug nobody."),
    ],
)
def test_suspend_and_resume_refuse_bad_input(tenant_a, args, message):
    with pytest.raises(CommandError) as refused:
        run(*args)

    assert message in str(refused.value)
    assert Tenant.objects.get(pk=tenant_a.pk).status == "active"
    assert not AuditEvent.objects.exists()


def test_tenant_invite_admin_prints_a_new_link(tenant_a, settings):
    settings.PUBLIC_BASE_URL = "https://cs.example.com"

    out = run("tenant_invite_admin", tenant_a.slug, "--email", "new@a.test")
    with pytest.raises(CommandError) as bad:
        run("tenant_invite_admin", tenant_a.slug, "--email", "nope")

    assert LINK.match(out.splitlines()[-1])
    assert str(bad.value) == "--email: Enter a valid email address."
    assert Invitation.objects.get(tenant=tenant_a).email == "new@a.test"


def test_an_operator_account_made_by_command_is_recorded():
    """Django's own ``createsuperuser`` made an account with every right in the operators' admin
    and left no row anywhere."""
    call_command("createsuperuser", "--noinput", "--email", "root@countersign.test")

    user = User.objects.get(email="root@countersign.test")
    row = AuditEvent.objects.get(action="user.created_as_operator")
    assert (row.tenant_id, row.object_id, row.data) == (
        None,
        str(user.pk),
        {"email": "root@countersign.test", "is_superuser": True},
    )
