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
    # Past the columns, under what validate_email takes (320): DataErrors from the insert.
    (("--admin-email", "a" * 300 + "@acme.test"), "--admin-email: An address is at most 254"),
    (("--admin-name", "A" * 151), "--admin-name: A name is at most 150 characters long"),
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
    ) == [
        ("tenant.suspended", {"reason": "unpaid invoice", "sends_in_flight": 0}),
        ("tenant.resumed", {}),
    ]


SLUG_COMMANDS = {
    "tenant_suspend": ("--reason", "fraud"),
    "tenant_resume": (),
    "tenant_invite_admin": ("--email", "ana@acme.test"),
    "tenant_storage_quota": ("--bytes", str(20 * 1024**3)),
}


@pytest.mark.parametrize(
    ("slug", "message"),
    [
        ("", "No tenant has the slug ''."),
        ("   ", "No tenant has the slug '   '."),
        ("x" * 100_000, "No tenant has the slug '" + "x" * 40 + "'... (100000 characters)."),
    ],
    ids=["empty", "blank", "huge"],
)
@pytest.mark.parametrize("command", SLUG_COMMANDS)
def test_a_tenant_command_quotes_the_slug_it_did_not_find_and_cuts_it_short(
    tenant_a, command, slug, message
):
    """The slug was echoed as typed: an empty one read "No tenant has the slug ." and one of
    100,000 characters was a refusal of 100,000 characters."""
    with pytest.raises(CommandError) as refused:
        run(command, slug, *SLUG_COMMANDS[command])

    assert str(refused.value) == message
    assert not AuditEvent.objects.exists()
    assert Invitation.objects.count() == 0


def test_storage_quota_cuts_a_huge_quota_that_is_no_number_short(tenant_a):
    with pytest.raises(CommandError) as refused:
        run("tenant_storage_quota", tenant_a.slug, "--bytes", "x" * 100_000)

    assert str(refused.value).endswith("'" + "x" * 40 + "'... (100000 characters) is not.")
    assert not AuditEvent.objects.exists()


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("tenant_suspend", "tenant-a"), "--reason"),
        (("tenant_suspend", "tenant-a", "--reason", " "), "--reason: Say why the tenant is"),
        (("tenant_suspend", "nobody", "--reason", "x"), "No tenant has the slug 'nobody'."),
        (("tenant_suspend", "tenant-a", "--reason", "a\x1bb"), "plain text but holds U+001B"),
        # Taken, and read by the tenant's admins with the rest of the line reversed (their
        # audit page, "An operator suspended this tenant"), where every name refuses it.
        (
            ("tenant_suspend", "tenant-a", "--reason", "Unpaid \u202e711-4202 eciovni"),
            "--reason: A reason cannot hold the control character U+202E.",
        ),
        (("tenant_resume", "nobody"), "No tenant has the slug 'nobody'."),
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


@pytest.mark.parametrize(
    ("email", "message"),
    [
        ("root\x00@countersign.test", "Error: email: it must be plain text but holds U+0000"),
        ("root@\udcffcountersign.test", "holds the byte 0xFF, which is not UTF-8"),
        ("ROOT@Countersign.test", "Error: That email is already taken."),
    ],
    ids=["nul", "not-utf8", "same-address-other-case"],
)
def test_createsuperuser_refuses_an_address_it_cannot_store(email, message):
    """Django's command looked the address up as typed before checking it: the NUL and the byte
    reached the query (DataError, UnicodeEncodeError), and another case of a taken address was
    not found, then stored in lower case (IntegrityError). Tracebacks, all three."""
    call_command("createsuperuser", "--noinput", "--email", "root@countersign.test")

    with pytest.raises(CommandError) as refused:
        call_command("createsuperuser", "--noinput", "--email", email)

    assert message in str(refused.value)
    assert User.objects.count() == 1
    assert AuditEvent.objects.count() == 1


GIB = 1024**3


def test_storage_quota_by_command_is_the_tenants_own_then_the_deployments_again(tenant_a, settings):
    settings.TENANT_ATTACHMENT_STORAGE_BYTES = GIB

    own = run("tenant_storage_quota", tenant_a.slug, "--bytes", str(20 * GIB))
    held = Tenant.objects.get(pk=tenant_a.pk).attachment_storage_quota_bytes
    back = run("tenant_storage_quota", tenant_a.slug, "--default")

    assert own == f"Tenant A (tenant-a) may hold {20 * GIB} bytes of attachments (its own quota)\n"
    assert (
        back
        == f"Tenant A (tenant-a) may hold {GIB} bytes of attachments (the deployment's quota)\n"
    )
    assert (held, Tenant.objects.get(pk=tenant_a.pk).attachment_storage_quota_bytes) == (
        20 * GIB,
        None,
    )
    default = {"attachment_storage_quota": GIB, "own_quota": False}
    twenty = {"attachment_storage_quota": 20 * GIB, "own_quota": True}
    rows = AuditEvent.objects.filter(tenant=tenant_a).order_by("id")
    assert list(rows.values_list("action", "actor", "object_type", "object_id", "data")) == [
        (
            "tenant.storage_quota_changed",
            None,
            "tenant",
            str(tenant_a.pk),
            {"before": default, "after": twenty},
        ),
        (
            "tenant.storage_quota_changed",
            None,
            "tenant",
            str(tenant_a.pk),
            {"before": twenty, "after": default},
        ),
    ]


def test_a_suspended_tenant_may_be_given_its_own_quota_and_stays_suspended(tenant_a):
    run("tenant_suspend", tenant_a.slug, "--reason", "unpaid invoice")

    run("tenant_storage_quota", tenant_a.slug, "--bytes", str(20 * GIB))

    tenant = Tenant.objects.get(pk=tenant_a.pk)
    assert (tenant.status, tenant.attachment_storage_quota) == ("suspended", 20 * GIB)


BAD_QUOTA = [
    (
        ("--bytes", "-5"),
        "--bytes: A quota is from 3145728 bytes (one draft's files, "
        "ATTACHMENT_MAX_DRAFT_BYTES) to 1125899906842624 bytes (1 PiB); -5 is not.",
    ),
    (("--bytes", str(3 * 1024 * 1024 - 1)), f"{3 * 1024 * 1024 - 1} is not."),
    (("--bytes", str(1024**5 + 1)), f"{1024**5 + 1} is not."),
    (("--bytes", "9" * 5000), "a number of 5000 digits is not."),
    (
        ("--bytes", "20GiB"),
        "--bytes: A quota is a whole number of bytes, such as 21474836480 "
        "for 20 GiB; '20GiB' is not.",
    ),
    (("--bytes", "2_000_000_000"), "'2_000_000_000' is not."),
    (("--bytes", "4e9"), "'4e9' is not."),
    (("--bytes", ""), "'' is not."),
    (("--bytes", "5000000", "--default"), "not allowed with argument"),
    ((), "one of the arguments --bytes --default is required"),
    (("--default",), "The tenant tenant-a has this quota already; nothing was changed."),
]


@pytest.mark.parametrize(("args", "message"), BAD_QUOTA)
def test_storage_quota_refuses_bad_input_and_changes_nothing(tenant_a, args, message):
    with pytest.raises(CommandError) as refused:
        run("tenant_storage_quota", tenant_a.slug, *args)

    assert message in str(refused.value)
    assert Tenant.objects.get(pk=tenant_a.pk).attachment_storage_quota_bytes is None
    assert not AuditEvent.objects.exists()


def test_storage_quota_refuses_an_unknown_tenant_and_the_quota_it_has(tenant_a):
    run("tenant_storage_quota", tenant_a.slug, "--bytes", str(20 * GIB))

    with pytest.raises(CommandError) as unknown:
        run("tenant_storage_quota", "nobody", "--bytes", str(20 * GIB))
    with pytest.raises(CommandError) as same:
        run("tenant_storage_quota", tenant_a.slug, "--bytes", str(20 * GIB))

    assert str(unknown.value) == "No tenant has the slug 'nobody'."
    assert str(same.value) == "The tenant tenant-a has this quota already; nothing was changed."
    assert AuditEvent.objects.count() == 1
