"""A suppression an admin types is stored in the form every send is checked in
(intents.policy.normalize_address), so an address typed in punycode, as a bounce report shows
it, stops the mail to that person."""

import importlib

import pytest
from django.apps import apps
from django.urls import reverse

from console import services as console_services
from intents.models import Suppression
from intents.policy import recipient_problems
from tenants.services import AdminError
from tests.factories import make_local_mailbox

pytestmark = pytest.mark.django_db


@pytest.mark.parametrize("typed", ["Ana@XN--BCHER-KVA.de", " ana@bücher.de ", "ANA@BÜCHER.DE"])
def test_a_suppression_typed_in_any_form_stops_the_send(tenant_a, member_of, typed):
    admin = member_of(tenant_a, "admin").user
    console_services.suppression_add(tenant=tenant_a, address=typed, note="bounce", actor=admin)
    mailbox = make_local_mailbox(tenant_a)

    assert list(Suppression.objects.values_list("address", flat=True)) == ["ana@xn--bcher-kva.de"]
    for written in ("ana@xn--bcher-kva.de", "Ana@bücher.de"):
        problems = recipient_problems(tenant=tenant_a, mailbox=mailbox, addresses=[written])
        assert [p.code for p in problems] == ["suppressed"], written


def test_a_second_form_of_a_suppressed_address_is_already_suppressed(tenant_a, member_of):
    admin = member_of(tenant_a, "admin").user
    console_services.suppression_add(
        tenant=tenant_a, address="ana@bücher.de", note="asked", actor=admin
    )
    with pytest.raises(AdminError) as refused:
        console_services.suppression_add(
            tenant=tenant_a, address="ana@xn--bcher-kva.de", note="again", actor=admin
        )
    assert refused.value.code == "already_suppressed"
    assert Suppression.objects.count() == 1


def test_the_migration_rewrites_old_rows_keeping_the_stronger_twin(tenant_a, tenant_b):
    make = Suppression.objects.create
    make(tenant=tenant_a, address="ana@xn--bcher-kva.de", reason="manual", source="p")
    make(tenant=tenant_a, address="ana@bücher.de", reason="bounced", source="s")
    make(tenant=tenant_a, address="bo@xn--bcher-kva.de", reason="rejected", source="s")
    make(tenant=tenant_b, address="bo@xn--bcher-kva.de", reason="bounced", source="s")
    make(tenant=tenant_b, address="bo@bücher.de", reason="manual", source="p")
    make(tenant=tenant_b, address="plain@example.com", reason="manual", source="p")

    migration = importlib.import_module("intents.migrations.0016_suppressions_normalised")
    migration.normalise(apps, None)

    rows = set(Suppression.objects.values_list("tenant__slug", "address", "reason"))
    assert rows == {
        ("tenant-a", "ana@bücher.de", "manual"),
        ("tenant-a", "bo@bücher.de", "rejected"),
        ("tenant-b", "bo@bücher.de", "manual"),
        ("tenant-b", "plain@example.com", "manual"),
    }


def test_a_search_holding_a_nul_finds_nothing_instead_of_failing(tenant_a, member_of, signed_in):
    admin = member_of(tenant_a, "admin").user
    console_services.suppression_add(
        tenant=tenant_a, address="gone@example.com", note="bounce", actor=admin
    )
    client = signed_in(admin)
    url = reverse("admin_suppressions", args=[tenant_a.slug])

    with_nul = client.get(url, {"q": "gone\x00"})
    plain = client.get(url, {"q": "gone"})

    assert with_nul.status_code == 200
    assert "gone@example.com" not in with_nul.content.decode()
    assert "gone@example.com" in plain.content.decode()


def test_a_search_for_a_sub_address_finds_the_entry_that_covers_it(tenant_a, member_of, signed_in):
    """ana+billing@ is refused as ana@example.com: an admin who looks it up finds that entry."""
    admin = member_of(tenant_a, "admin").user
    for address in ("ana@example.com", "bo@example.com"):
        console_services.suppression_add(
            tenant=tenant_a, address=address, note="bounce", actor=admin
        )
    client = signed_in(admin)
    url = reverse("admin_suppressions", args=[tenant_a.slug])

    page = client.get(url, {"q": " Ana+Billing@Example.com"}).content.decode()

    assert "ana@example.com" in page
    assert "bo@example.com" not in page
