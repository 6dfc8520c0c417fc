"""Look-alike addresses at invitation and sign-in. Django's validate_email took any character past
U+00A0 in a domain as it came, so a tenant admin could invite ``bob@\uff41cme.test`` (a full-width a, U+FF41),
which reads as ``bob@acme.test``: a second account that every colleague would take for Bob's.
The domain is now mapped to its IDNA (UTS 46) A-label, so that spelling names Bob himself; a
local part that is not composed (NFC), holds compatibility forms or mixes scripts is refused,
naming why; and sign-in and lock-out releases look the address up in the same form, so an
account keeps signing in whichever way its address is typed."""

import pytest
from axes.models import AccessAttempt
from django.core.management import CommandError, call_command
from django.test import Client
from django.urls import reverse

from tenants.invitations import invitation_create
from tenants.models import Invitation, SingleSignOn, User
from tenants.services import AdminError
from tenants.signin_lockouts import signin_lockout_release
from tests.factories import UserFactory
from tests.pages import based_on
from tests.routed_client import RoutedClient

pytestmark = pytest.mark.django_db

PASSWORD = "a-long-enough-passphrase-77"


def _invite(tenant, actor, email):
    return invitation_create(tenant=tenant, email=email, role="viewer", actor=actor)


def test_a_full_width_domain_invites_the_ascii_address(tenant_a, member_of):
    admin = member_of(tenant_a, "admin").user

    invitation, _token = _invite(tenant_a, admin, "bob@\uff41cme.test")

    assert invitation.email == "bob@acme.test"


def test_a_look_alike_of_a_member_is_that_member(tenant_a, member_of):
    admin = member_of(tenant_a, "admin").user
    member_of(tenant_a, "viewer", user=UserFactory(email="bob@acme.test"))

    with pytest.raises(AdminError) as refused:
        _invite(tenant_a, admin, "bob@\uff41cme.test")

    assert "bob@acme.test is already a member" in refused.value.message


def test_an_idn_domain_is_kept_as_its_a_label(tenant_a, member_of):
    admin = member_of(tenant_a, "admin").user

    invitation, _token = _invite(tenant_a, admin, "Ana@B\u00fccher.test")

    assert invitation.email == "ana@xn--bcher-kva.test"


@pytest.mark.parametrize(
    ("email", "said"),
    [
        ("b\u043eb@acme.test", "mixes letters of several scripts (Cyrillic, Latin)"),
        ("\uff42ob@acme.test", "U+FF42 FULLWIDTH LATIN SMALL LETTER B"),
        ("jose\u0301@acme.test", "composed form (NFC)"),
    ],
)
def test_a_local_part_that_could_pass_for_another_is_refused(tenant_a, member_of, email, said):
    admin = member_of(tenant_a, "admin").user

    with pytest.raises(AdminError) as refused:
        _invite(tenant_a, admin, email)

    assert said in refused.value.message
    assert refused.value.field == "email"
    assert not Invitation.objects.exists()


def test_a_local_part_beyond_ascii_stays_refused(tenant_a, member_of):
    admin = member_of(tenant_a, "admin").user

    with pytest.raises(AdminError) as refused:
        _invite(tenant_a, admin, "jos\u00e9@acme.test")

    assert refused.value.message == "Enter a valid email address."


@pytest.mark.parametrize("typed", ["bob@\uff41cme.test", "BOB@ACME.TEST", " bob@acme.test "])
def test_an_account_signs_in_whichever_way_its_domain_is_typed(password, typed):
    UserFactory(email="bob@acme.test")
    browser = Client()

    answer = browser.post(reverse("login"), {"username": typed, "password": password})

    assert answer.status_code == 302
    assert browser.session.get("_auth_user_id")


def test_an_account_with_an_idn_domain_signs_in_with_its_unicode_spelling(password):
    UserFactory(email="ana@xn--bcher-kva.test")
    browser = Client()

    answer = browser.post(
        reverse("login"), {"username": "ana@b\u00fccher.test", "password": password}
    )

    assert answer.status_code == 302


def test_a_lock_out_is_released_under_the_same_form(password, settings):
    UserFactory(email="bob@acme.test")
    browser = Client()
    for _ in range(settings.AXES_FAILURE_LIMIT):
        browser.post(reverse("login"), {"username": "bob@\uff41cme.test", "password": "wrong"})
    assert AccessAttempt.objects.filter(username="bob@acme.test").exists()

    address, released = signin_lockout_release(email="BOB@\uff41cme.test")

    assert address == "bob@acme.test" and released
    assert not AccessAttempt.objects.filter(username="bob@acme.test").exists()


def test_an_account_stored_before_keeps_its_address_when_it_cannot_be_mapped(password):
    # An operator made with createsuperuser before (Django's validator takes "localhost").
    User.objects.create_user("root@localhost", password)
    browser = Client()

    answer = browser.post(reverse("login"), {"username": "root@localhost", "password": password})

    assert answer.status_code == 302


def test_the_upgrade_stores_unicode_domains_as_a_labels_and_keeps_look_alikes_apart(
    tenant_a, member_of
):
    from importlib import import_module

    from django.apps import apps

    migration = import_module("tenants.migrations.0016_account_addresses_as_a_labels")
    ana = UserFactory(email="ana@b\u00fccher.test")
    bob = UserFactory(email="bob@acme.test")
    fake_bob = UserFactory(email="bob@\uff41cme.test")

    migration.domains_as_a_labels(apps, None)

    ana.refresh_from_db()
    fake_bob.refresh_from_db()
    bob.refresh_from_db()
    assert ana.email == "ana@xn--bcher-kva.test"
    assert (bob.email, fake_bob.email) == ("bob@acme.test", "bob@\uff41cme.test")


# --- the operators' ways of making an account: createsuperuser and the Django admin ---


def _createsuperuser(monkeypatch, email):
    monkeypatch.setenv("DJANGO_SUPERUSER_EMAIL", email)
    monkeypatch.setenv("DJANGO_SUPERUSER_PASSWORD", "an-operators-passphrase-31")
    call_command("createsuperuser", "--noinput", verbosity=0)


@pytest.mark.parametrize(
    ("typed", "stored"),
    [
        ("root@\uff43ountersign.test", "root@countersign.test"),
        ("Root@B\u00fccher.test", "root@xn--bcher-kva.test"),
        ("root@localhost", "root@localhost"),
    ],
    ids=["full-width-domain", "idn-domain", "localhost"],
)
def test_createsuperuser_stores_the_account_form_of_the_address(monkeypatch, typed, stored):
    _createsuperuser(monkeypatch, typed)

    assert list(User.objects.values_list("email", flat=True)) == [stored]


def test_createsuperuser_finds_a_look_alike_of_an_account_taken(monkeypatch):
    UserFactory(email="root@countersign.test")

    with pytest.raises(CommandError) as refused:
        _createsuperuser(monkeypatch, "root@\uff43ountersign.test")

    assert "That email is already taken." in str(refused.value)
    assert User.objects.count() == 1


@pytest.mark.parametrize(
    ("email", "said"),
    [
        ("r\u043eot@countersign.test", "mixes letters of several scripts (Cyrillic, Latin)"),
        ("\uff52oot@countersign.test", "U+FF52 FULLWIDTH LATIN SMALL LETTER R"),
        ("jose\u0301@countersign.test", "composed form (NFC)"),
    ],
)
def test_createsuperuser_refuses_a_local_part_that_could_pass_for_another(monkeypatch, email, said):
    with pytest.raises(CommandError) as refused:
        _createsuperuser(monkeypatch, email)

    assert said in str(refused.value)
    assert not User.objects.exists()


ADMIN_USERS = "/ops/admin/tenants/user/"


def _admin_add(operator, email):
    return operator.post(
        f"{ADMIN_USERS}add/",
        {"email": email, "password1": PASSWORD, "password2": PASSWORD, "usable_password": "true"},
    )


@pytest.mark.parametrize(
    ("typed", "stored"),
    [
        ("bob@\uff41cme.test", "bob@acme.test"),
        ("Ana@B\u00fccher.test", "ana@xn--bcher-kva.test"),
        ("root@localhost", "root@localhost"),
    ],
    ids=["full-width-domain", "idn-domain", "localhost"],
)
def test_the_admins_add_form_stores_the_account_form_of_the_address(operator, typed, stored):
    answer = _admin_add(operator, typed)

    assert answer.status_code == 302
    assert User.objects.filter(email=stored, is_superuser=False).exists()


def test_the_admins_add_form_finds_a_look_alike_of_an_account(operator):
    UserFactory(email="bob@acme.test")

    answer = _admin_add(operator, "bob@\uff41cme.test")

    assert answer.status_code == 200
    assert "already exists" in answer.content.decode()
    assert User.objects.filter(is_superuser=False).count() == 1


@pytest.mark.parametrize(
    ("email", "said"),
    [
        ("b\u043eb@acme.test", "mixes letters of several scripts (Cyrillic, Latin)"),
        ("\uff42ob@acme.test", "U+FF42 FULLWIDTH LATIN SMALL LETTER B"),
    ],
)
def test_the_admins_forms_refuse_a_local_part_that_could_pass_for_another(operator, email, said):
    carol = UserFactory(email="carol@acme.test")

    added = _admin_add(operator, email)
    changed = operator.post(
        f"{ADMIN_USERS}{carol.pk}/change/",
        {
            "email": email,
            "full_name": "",
            "is_active": "on",
            "date_joined_0": "2026-01-01",
            "date_joined_1": "00:00:00",
        },
    )

    assert said in added.content.decode()
    assert said in changed.content.decode()
    assert list(User.objects.filter(is_superuser=False).values_list("email", flat=True)) == [
        "carol@acme.test"
    ]


def test_the_admins_change_form_stores_the_account_form_of_a_new_address(operator):
    carol = UserFactory(email="carol@acme.test")

    answer = operator.post(
        f"{ADMIN_USERS}{carol.pk}/change/",
        {
            "email": "Carol@B\u00fccher.test",
            "full_name": "",
            "is_active": "on",
            "date_joined_0": "2026-01-01",
            "date_joined_1": "00:00:00",
        },
    )

    assert answer.status_code == 302
    carol.refresh_from_db()
    assert carol.email == "carol@xn--bcher-kva.test"


def test_the_admins_change_form_keeps_an_address_stored_before_the_rule(operator):
    # A look-alike kept apart by tenants.0016: the operator may still switch it off.
    fake = UserFactory(email="bob@\uff41cme.test")

    answer = operator.post(
        f"{ADMIN_USERS}{fake.pk}/change/",
        {
            "email": "bob@\uff41cme.test",
            "full_name": "",
            "date_joined_0": "2026-01-01",
            "date_joined_1": "00:00:00",
        },
    )

    assert answer.status_code == 302
    fake.refresh_from_db()
    assert (fake.email, fake.is_active) == ("bob@\uff41cme.test", False)


def test_the_sso_domains_are_stored_as_account_addresses_hold_them(tenant_a, member_of):
    admin = RoutedClient()
    admin.force_login(
        member_of(tenant_a, "admin").user, backend="django.contrib.auth.backends.ModelBackend"
    )
    page = reverse("admin_signin", args=[tenant_a.slug])
    form = {
        "enabled": "on",
        "issuer": "https://login.acme.test/realms/acme",
        "client_id": "countersign",
        "client_secret": "s3cret-from-the-idp-7f2c",
        "password_signin_allowed": "on",
        "jit_role": "",
        "based_on": based_on(admin, page, "sso_form"),
    }
    url = reverse("admin_sso_settings", args=[tenant_a.slug])

    refused = admin.post(url, {**form, "domains": "acme.test, xn--zz.test"})
    saved = admin.post(url, {**form, "domains": "B\u00fccher.test, \uff41cme.test, corp.local"})

    assert refused.status_code == 400
    assert "Not a domain: xn--zz.test" in refused.content.decode()
    assert saved.status_code == 302
    assert SingleSignOn.objects.get(tenant=tenant_a).jit_domains == [
        "acme.test",
        "corp.local",
        "xn--bcher-kva.test",
    ]
