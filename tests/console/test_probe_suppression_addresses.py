"""An outside probe of the suppression an admin types (console's suppressions page): the same
hostile addresses a draft's recipients refuse, and the addresses a draft may be sent to.

Found: the form's Django EmailField refused an address with letters beyond ASCII before the
@ sign ("j\u00fcrgen@example.com"), which a draft, an agent's or a reviewer's, is sent to: the
admin could not stop the mail to that customer. Every other refusal read "Enter a valid email
address.", naming no character (a zero-width space, a right-to-left override, a full-width @
sign); and a line break, a tab or a no-break space around the address was stripped unsaid,
where a draft's recipient refuses it naming the character."""

import pytest
from django.urls import reverse

from intents.models import Suppression
from intents.policy import recipient_problems
from tests.factories import make_local_mailbox

pytestmark = pytest.mark.django_db


def _add(client, tenant, typed):
    url = reverse("admin_suppression_add", args=[tenant.slug])
    return client.post(url, {"address": typed, "note": "asked"})


@pytest.fixture
def admin_client(tenant_a, member_of, signed_in):
    return signed_in(member_of(tenant_a, "admin").user)


def test_an_address_a_draft_is_sent_to_can_be_suppressed_and_the_send_stops(tenant_a, admin_client):
    response = _add(admin_client, tenant_a, "J\u00fcrgen@B\u00fccher.de")

    assert response.status_code == 302
    assert list(Suppression.objects.values_list("address", flat=True)) == [
        "j\u00fcrgen@xn--bcher-kva.de"
    ]
    mailbox = make_local_mailbox(tenant_a)
    problems = recipient_problems(
        tenant=tenant_a, mailbox=mailbox, addresses=["j\u00fcrgen@xn--bcher-kva.de"]
    )
    assert [p.code for p in problems] == ["suppressed"]


def test_the_same_address_written_the_other_way_is_already_suppressed(tenant_a, admin_client):
    _add(admin_client, tenant_a, "ANA@B\u00dcCHER.DE")

    again = _add(admin_client, tenant_a, "ana@xn--bcher-kva.de")

    assert again.status_code == 400
    assert "ana@xn--bcher-kva.de is already suppressed" in again.content.decode()
    assert Suppression.objects.count() == 1


STRAY = {
    "CR LF after": ("ana@example.com\r\n", "U+000D CARRIAGE RETURN"),
    "tab before": ("\tana@example.com", "U+0009 CHARACTER TABULATION"),
    "no-break space after": ("ana@example.com\u00a0", "U+00A0 NO-BREAK SPACE"),
    "line separator after": ("ana@example.com\u2028", "U+2028 LINE SEPARATOR"),
    "NUL inside": ("ana\x00@example.com", "U+0000"),
    "zero-width space inside": ("an\u200ba@example.com", "ZERO WIDTH SPACE"),
    "zero-width joiner in the domain": ("ana@exa\u200dmple.com", "ZERO WIDTH JOINER"),
    "right-to-left override": ("\u202eana@example.com", "RIGHT-TO-LEFT OVERRIDE"),
    "full-width @ sign": ("ana\uff20example.com", "full-width"),
}


@pytest.mark.parametrize(("typed", "named"), STRAY.values(), ids=STRAY.keys())
def test_a_hostile_address_is_refused_naming_the_character_and_nothing_is_stored(
    tenant_a, admin_client, typed, named
):
    response = _add(admin_client, tenant_a, typed)

    assert response.status_code == 400
    assert named in response.content.decode()
    assert not Suppression.objects.exists()


def test_plain_spaces_around_an_address_still_pass(tenant_a, admin_client):
    assert _add(admin_client, tenant_a, "  ana@example.com ").status_code == 302
    assert list(Suppression.objects.values_list("address", flat=True)) == ["ana@example.com"]
