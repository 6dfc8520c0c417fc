"""Found by an outside probe: a broadcast's subject and bodies were approved with characters
nobody sees unnamed, where a draft's page names them (cf3f1a5): 'Refund of $\u202e001' reads
'$100' on the page and '$001' where a client drops the override, for every recipient at once.
The broadcast's page names them by field as the draft's does, with the subject as it holds
them, and says so before Approve; the characters people write text with are not named."""

from __future__ import annotations

import pytest

from intents.services.broadcasts import broadcast_create
from tests.factories import make_local_mailbox

pytestmark = pytest.mark.django_db


def _page(tenant, signed_in, member_of, *, subject, text, html="", value="7"):
    broadcast = broadcast_create(
        tenant=tenant,
        mailbox=make_local_mailbox(tenant),
        subject=subject,
        text=text,
        html=html,
        recipients=[{"address": "p@example.com", "variables": {"n": value}}],
    )
    client = signed_in(member_of(tenant, "approver").user)
    return client.get(f"/t/{tenant.slug}/broadcasts/{broadcast.pk}/").content.decode()


@pytest.mark.parametrize(
    ("fields", "where", "named"),
    [
        ({"subject": "Refund of $\u202e001 {{ n }}"}, "subject", "U+202E RIGHT-TO-LEFT OVERRIDE"),
        ({"text": "Call 555\u200b0100 {{ n }}"}, "text", "U+200B ZERO WIDTH SPACE"),
        ({"html": "<p>Hi&#x2066; {{ n }}</p>"}, "html", "U+2066 LEFT-TO-RIGHT ISOLATE"),
        ({"value": "7\U000e0041"}, "subject", "U+E0041 TAG LATIN CAPITAL LETTER A"),
    ],
    ids=["subject", "text", "html-reference", "value-in-the-sample"],
)
def test_characters_nobody_sees_are_named_by_field_before_approve(
    tenant_a, signed_in, member_of, fields, where, named
):
    given = {"subject": "Order {{ n }}", "text": "Hello {{ n }}", **fields}

    page = _page(tenant_a, signed_in, member_of, **given)

    assert f'data-invisible-in="{where}"' in page
    assert named in page
    assert "data-invisible-to-check" in page


def test_the_subject_is_shown_with_them_as_code_points(tenant_a, signed_in, member_of):
    page = _page(tenant_a, signed_in, member_of, subject="Refund of $\u202e001", text="Hi")

    assert "Refund of $[U+202E]001" in page


def test_the_characters_people_write_text_with_are_not_named(tenant_a, signed_in, member_of):
    page = _page(
        tenant_a,
        signed_in,
        member_of,
        subject="Pedido\u00a0{{ n }} \u200f\u0645\u06cc\u200c\u0634\u0648\u062f",
        text="Hola\u00ad {{ n }} 👩\u200d💻 \u200e",
    )

    assert "data-invisible-in" not in page
    assert "data-invisible-to-check" not in page


def test_other_recipients_values_with_them_are_counted_and_their_rows_named(
    tenant_a, signed_in, member_of
):
    """The page names the sample's characters only: a CSV row further down with U+202E in a
    name went out unnamed. Counted over every row, in the query."""
    broadcast = broadcast_create(
        tenant=tenant_a,
        mailbox=make_local_mailbox(tenant_a),
        subject="Order {{ n }}",
        text="Hello {{ n }}",
        html="",
        recipients=[
            {"address": "a@example.com", "variables": {"n": "7"}},
            {"address": "b@example.com", "variables": {"n": "Ana\u202emoc.live"}},
            {"address": "c@example.com", "variables": {"n": "8"}},
            {"address": "d@example.com", "variables": {"n": "55\u200b5"}},
        ],
    )
    client = signed_in(member_of(tenant_a, "approver").user)
    page = client.get(f"/t/{tenant_a.slug}/broadcasts/{broadcast.pk}/").content.decode()

    section = page.split("data-values-invisible")[1].split("</section>")[0]
    assert 'class="count">2<' in section
    assert 'data-value-invisible="2"' in section and "U+202E RIGHT-TO-LEFT OVERRIDE" in section
    assert 'data-value-invisible="4"' in section and "U+200B ZERO WIDTH SPACE" in section
    assert 'data-value-invisible="1"' not in section
    assert "data-values-invisible-to-check" in page.split("/approve/")[1].split("</form>")[0]
