"""A person posts a broadcast from the review pages: CSV or JSON upload, the agent API's checks
with every bad row listed and nothing saved, only from mailboxes the person may decide for; a
viewer gets 403, another tenant's admin cannot reach this tenant's mailboxes."""

import json

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile

from intents import errors
from intents.models import Broadcast
from intents.services.broadcasts import broadcast_create
from tests.factories import make_local_mailbox

pytestmark = pytest.mark.django_db

CSV = "address,name,order\nKim@Example.com,Kim,A1\nlee@example.com,Lee,A2\n"


def url(tenant):
    return f"/t/{tenant.slug}/broadcasts/new/"


def fields(mailbox, upload, **overrides):
    data = {
        "mailbox": str(mailbox.pk),
        "name": "Outage",
        "subject": "Order {{ order }} is late",
        "text": "Hello {{ name }}, sorry.",
        "recipients": upload,
    }
    data.update(overrides)
    return data


def csv_file(text=CSV, name="people.csv"):
    return SimpleUploadedFile(name, text.encode(), content_type="text/csv")


def test_an_approver_posts_a_csv_and_gets_the_apis_hash(signed_in, member_of, tenant_a):
    mailbox = make_local_mailbox(tenant_a)
    approver = member_of(tenant_a, "approver").user
    response = signed_in(approver).post(url(tenant_a), fields(mailbox, csv_file()))
    broadcast = Broadcast.objects.get()
    assert response.status_code == 302
    assert response["Location"] == f"/t/{tenant_a.slug}/broadcasts/{broadcast.pk}/"
    assert (broadcast.created_by, broadcast.recipient_count) == (approver, 2)
    same = broadcast_create(
        tenant=tenant_a,
        mailbox=mailbox,
        subject="Order {{ order }} is late",
        text="Hello {{ name }}, sorry.",
        recipients_csv=CSV,
    )
    assert broadcast.content_hash == same.content_hash


def test_a_json_file_is_the_other_format(signed_in, member_of, tenant_a):
    mailbox = make_local_mailbox(tenant_a)
    rows = [{"address": "kim@example.com", "variables": {"name": "Kim", "order": "A1"}}]
    upload = SimpleUploadedFile("people.json", json.dumps(rows).encode())
    client = signed_in(member_of(tenant_a, "admin").user)
    assert client.post(url(tenant_a), fields(mailbox, upload)).status_code == 302
    assert Broadcast.objects.get().recipient_count == 1


def test_every_bad_row_is_listed_and_nothing_is_saved(signed_in, member_of, tenant_a):
    mailbox = make_local_mailbox(tenant_a)
    bad = (
        "address,name,order\nnot-an-address,Kim,A1\nok@example.com,Lee,A2\n"
        "OK@example.com,Ann,A3\nbad@@example.com,Bo,A4\n"
    )
    client = signed_in(member_of(tenant_a, "approver").user)
    response = client.post(url(tenant_a), fields(mailbox, csv_file(bad)))
    page = response.content.decode()
    assert response.status_code == 422
    listed = [f'data-bad-row="{n}"' in page for n in (1, 2, 3, 4)]
    assert listed == [True, False, True, True]
    assert "3 recipient rows are invalid; nothing was saved." in page
    assert not Broadcast.objects.exists()


def test_a_spreadsheet_export_with_a_bom_quotes_and_a_case_duplicate(
    signed_in, member_of, tenant_a
):
    """An Excel-style export: a byte-order mark before the header, "Email" as its name, commas
    and doubled quotes inside quoted values, CRLF line ends, addresses in mixed case."""
    mailbox = make_local_mailbox(tenant_a)
    client = signed_in(member_of(tenant_a, "admin").user)
    lines = ["\ufeffEmail,name,order"] + [
        f'"P{i}@Example.com","Smith, Jo ""{i}""",{i}' for i in range(300)
    ]
    duplicate = csv_file("\r\n".join([*lines, '"p5@EXAMPLE.COM","dup",5']) + "\r\n")

    refused = client.post(url(tenant_a), fields(mailbox, duplicate, text="Hi {{ name }}"))
    assert refused.status_code == 422
    page = refused.content.decode()
    assert "p5@EXAMPLE.COM is the same address as P5@Example.com on row 6" in page
    assert not Broadcast.objects.exists()

    created = client.post(
        url(tenant_a), fields(mailbox, csv_file("\r\n".join(lines) + "\r\n"), text="Hi {{ name }}")
    )
    assert created.status_code == 302
    broadcast = Broadcast.objects.get()
    assert broadcast.recipient_count == 300
    assert broadcast.recipients.get(address="p7@example.com").variables == {
        "name": 'Smith, Jo "7"',
        "order": "7",
    }


@pytest.mark.parametrize(
    ("upload", "message"),
    [
        (csv_file("address\n", name="x.json"), "The file is not valid JSON (line 1)."),
        (SimpleUploadedFile("x.json", b'{"address": "a@b.c"}'), "must hold a list"),
        (SimpleUploadedFile("x.csv", b"\xff\xfe\x00a"), "not UTF-8 text"),
        # Found by an outside probe: each was a 500.
        (SimpleUploadedFile("x.json", b"[" * 100_000), "The JSON file nests too deeply."),
        (
            SimpleUploadedFile(
                "x.json", b'["a@example.com' + b'", "a@example.com' * 200_000 + b'"]'
            ),
            "The JSON file holds more than 200,000 values: send the recipients as a CSV file.",
        ),
        (
            SimpleUploadedFile("x.json", b'[{"address": "\\ud800@example.com"}]'),
            # Refused as a draft's recipient is (common.addresses.stray_character_in).
            "address holds U+D800: an address may hold no line break",
        ),
    ],
)
def test_an_unreadable_file_is_a_visible_error(signed_in, member_of, tenant_a, upload, message):
    mailbox = make_local_mailbox(tenant_a)
    client = signed_in(member_of(tenant_a, "approver").user)
    response = client.post(url(tenant_a), fields(mailbox, upload))
    assert response.status_code == 422
    assert message in response.content.decode()
    assert not Broadcast.objects.exists()


def test_template_logic_is_refused_on_its_field(signed_in, member_of, tenant_a):
    mailbox = make_local_mailbox(tenant_a)
    client = signed_in(member_of(tenant_a, "approver").user)
    response = client.post(url(tenant_a), fields(mailbox, csv_file(), text="{% if x %}"))
    assert response.status_code == 422
    assert 'data-field-error="text"' in response.content.decode()
    assert not Broadcast.objects.exists()


def test_a_viewer_gets_403(signed_in, member_of, tenant_a):
    mailbox = make_local_mailbox(tenant_a)
    client = signed_in(member_of(tenant_a, "viewer").user)
    assert client.get(url(tenant_a)).status_code == 403
    assert client.post(url(tenant_a), fields(mailbox, csv_file())).status_code == 403
    assert (
        "data-new-broadcast" not in client.get(f"/t/{tenant_a.slug}/broadcasts/").content.decode()
    )
    assert not Broadcast.objects.exists()


def test_another_tenants_admin_cannot_post_from_this_tenants_mailbox(
    signed_in, member_of, tenant_a, tenant_b
):
    mailbox = make_local_mailbox(tenant_a)
    make_local_mailbox(tenant_b)
    client = signed_in(member_of(tenant_b, "admin").user)
    assert client.post(url(tenant_a), fields(mailbox, csv_file())).status_code == 404
    response = client.post(url(tenant_b), fields(mailbox, csv_file()))
    assert response.status_code == 422
    assert 'data-field-error="mailbox"' in response.content.decode()
    assert not Broadcast.objects.exists()


def test_only_mailboxes_the_person_may_decide_for(signed_in, member_of, tenant_a):
    mine = make_local_mailbox(tenant_a)
    other = make_local_mailbox(tenant_a, username="billing")
    membership = member_of(tenant_a, "approver")
    membership.approve_all_mailboxes = False
    membership.save(update_fields=["approve_all_mailboxes"])
    membership.approve_mailboxes.add(mine)
    client = signed_in(membership.user)
    form = client.get(url(tenant_a)).content.decode()
    response = client.post(url(tenant_a), fields(other, csv_file()))
    assert mine.address in form
    assert other.address not in form
    assert response.status_code == 422
    assert not Broadcast.objects.exists()
    with pytest.raises(errors.NoRight):
        broadcast_create(
            tenant=tenant_a,
            mailbox=other,
            subject="s",
            text="t",
            recipients=["a@example.com"],
            actor_user=membership.user,
        )


def test_a_user_of_two_tenants_posts_only_from_the_tenant_in_the_url(
    signed_in, member_of, tenant_a, tenant_b
):
    mailbox_a = make_local_mailbox(tenant_a)
    mailbox_b = make_local_mailbox(tenant_b)
    both = member_of(tenant_a, "approver")
    member_of(tenant_b, "approver", user=both.user)
    client = signed_in(both.user)
    crossed = client.post(url(tenant_b), fields(mailbox_a, csv_file()))
    assert crossed.status_code == 422
    assert mailbox_a.address not in client.get(url(tenant_b)).content.decode()
    assert client.post(url(tenant_b), fields(mailbox_b, csv_file())).status_code == 302
    assert list(Broadcast.objects.values_list("tenant_id", "mailbox_id")) == [
        (tenant_b.pk, mailbox_b.pk)
    ]


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        (
            '[{"address": "a@example.com", "variables": {"name": NaN, "order": Infinity}}]',
            "NaN is not valid JSON; numbers must be finite",
        ),
        (
            '[{"address": "a@example.com", "variables": {"name": "A", "order": 1e400}}]',
            "[0].variables.order: numbers must be finite (this one is beyond a float)",
        ),
        (
            '[{"address": "a@example.com", "address": "b@example.com",'
            ' "variables": {"name": "A", "order": 1}}]',
            "[0].address: this key appears more than once in its object",
        ),
    ],
)
def test_a_json_file_is_read_as_strictly_as_the_apis_body(
    signed_in, member_of, tenant_a, text, reason
):
    """Found by an outside probe: the file was read with Python's lenient json, which the agent
    API refuses (common.strict_json): NaN and Infinity became the values "nan" and "inf" in the
    customers' messages ("Hello nan"), and of an address named twice in a row the last one was
    kept, where a person reading the file sees the first."""
    mailbox = make_local_mailbox(tenant_a)
    client = signed_in(member_of(tenant_a, "approver").user)
    upload = SimpleUploadedFile("people.json", text.encode())

    response = client.post(url(tenant_a), fields(mailbox, upload))

    assert response.status_code == 422
    assert f"The file is not valid JSON: {reason}." in response.content.decode()
    assert not Broadcast.objects.exists()
