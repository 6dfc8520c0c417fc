"""The broadcast routes: post (JSON and CSV), row errors as 422 naming each row, replace,
read, and isolation (another tenant's token gets 404; agents have no approve route)."""

from __future__ import annotations

import json

import pytest

from intents.models import Broadcast, IntentEvent
from intents.services.broadcasts import broadcast_create

pytestmark = pytest.mark.django_db


def body(mailbox, **overrides):
    doc = {
        "mailbox": mailbox.address,
        "name": "Outage",
        "subject": "Order {{ order }} delayed",
        "text": "Hello {{ name }}",
        "recipients": [
            {"address": f"c{i}@example.com", "variables": {"name": f"N{i}", "order": i}}
            for i in range(3)
        ],
    }
    doc.update(overrides)
    return doc


def test_post_broadcast_json(api, token_a, mailbox_a):
    response = api.post("/broadcasts", body(mailbox_a), token=token_a, key="b-1")
    assert response.status_code == 201, response.content
    doc = response.json()
    broadcast = Broadcast.objects.get()
    assert response["Location"] == f"/api/v1/broadcasts/{broadcast.pk}"
    assert (doc["state"], doc["recipient_count"]) == ("pending_review", 3)
    assert doc["content_hash"] == broadcast.content_hash
    assert broadcast.agent_token is not None
    assert api.get(f"/broadcasts/{broadcast.pk}", token=token_a).json() == doc


def test_post_broadcast_csv(api, token_a, mailbox_a):
    csv_text = "address,name,order\nc0@example.com,N0,0\nc1@example.com,N1,1\n"
    response = api.post(
        "/broadcasts",
        body(mailbox_a, recipients=None, recipients_csv=csv_text),
        token=token_a,
        key="b-2",
    )
    assert response.status_code == 201, response.content
    assert response.json()["recipient_count"] == 2


def test_bad_rows_are_a_422_naming_each_row(api, token_a, mailbox_a):
    rows = [
        {"address": "c0@example.com", "variables": {"name": "a", "order": 1}},
        {"address": "nope", "variables": {"name": "b", "order": 2}},
        {"address": "c2@example.com", "variables": {"order": 3}},
    ]
    response = api.post("/broadcasts", body(mailbox_a, recipients=rows), token=token_a, key="b-3")
    assert response.status_code == 422
    problem = response.json()
    assert problem["code"] == "recipients_invalid"
    # The item's index in the JSON array, as every other error of the API names it (to[1]);
    # row: the recipient's number, counting from 1.
    assert [(e["field"], e["row"]) for e in problem["errors"]] == [
        ("recipients[1].address", 2),
        ("recipients[2].variables.name", 3),
    ]
    assert not Broadcast.objects.exists()


def test_bad_csv_rows_name_the_csv_column_and_the_row_after_the_header(api, token_a, mailbox_a):
    """A CSV is no JSON array: its rows are named by the CSV and the row number, counting from
    the line after the header, never as recipients[i] of a list the agent did not send."""
    csv_text = "address,name,order\nc0@example.com,N0,0\nnope,N1,1\nc2@example.com,N2,2\x07\n"
    response = api.post(
        "/broadcasts",
        body(mailbox_a, recipients=None, recipients_csv=csv_text),
        token=token_a,
        key="b-csv-rows",
    )

    problem = response.json()
    assert (response.status_code, problem["code"]) == (422, "recipients_invalid")
    assert [(e["field"], e["row"]) for e in problem["errors"]] == [
        ("recipients_csv.address", 2),
        ("recipients_csv.variables.order", 3),
    ]
    assert not Broadcast.objects.exists()


@pytest.mark.parametrize("route", ["post", "put"])
def test_the_body_check_and_the_row_check_name_an_item_by_one_index(api, token_a, mailbox_a, route):
    """Found by a probe: the row checks named the second item of `recipients` recipients[2]
    (its row number) while the body check, in the same request, named it recipients[1], as a
    draft's errors name the second address to[1]: an agent that followed the path fixed the
    wrong recipient. The body check answers first; once the agent fixes the item it named, the
    row check names the other item by the same rule, its row number beside it."""
    created = api.post("/broadcasts", body(mailbox_a), token=token_a, key="b-index-0").json()

    def send(rows, key):
        if route == "post":
            raw = json.dumps(body(mailbox_a, recipients=rows))
            return api.post("/broadcasts", raw=raw, token=token_a, key=key)
        return api.client.generic(
            "PUT",
            f"/api/v1/broadcasts/{created['id']}/recipients",
            data=json.dumps({"recipients": rows}),
            content_type="application/json",
            headers={"Authorization": f"Bearer {token_a}"},
        )

    fine = {"address": "c0@example.com", "variables": {"name": "a", "order": 0}}
    lone = {"address": "c1\ud800@example.com", "variables": {"name": "b", "order": 1}}
    bad = {"address": "nope", "variables": {"name": "c", "order": 2}}
    fixed = {"address": "c1@example.com", "variables": {"name": "b", "order": 1}}
    body_check = send([fine, lone, bad], "b-index-1").json()
    row_check = send([fine, fixed, bad], "b-index-2").json()
    draft = api.post(
        "/drafts",
        {
            "mailbox": mailbox_a.address,
            "to": ["ok@example.com", "nope"],
            "subject": "S",
            "text": "T",
        },
        token=token_a,
        key="b-index-draft",
    ).json()

    assert (body_check["code"], row_check["code"]) == ("unstorable_value", "recipients_invalid")
    assert [e["field"] for e in body_check["errors"]] == ["recipients[1].address"]
    assert [(e["field"], e["row"]) for e in row_check["errors"]] == [("recipients[2].address", 3)]
    assert [e["field"] for e in draft["errors"]] == ["to[1]"]
    assert Broadcast.objects.get().recipient_count == 3


def test_a_row_whose_message_would_render_over_the_limits_is_a_422_naming_it(
    api, token_a, mailbox_a
):
    """The template and each value are within their limits, the rendering is not: 1,000
    placeholders of a 2,000-character value are 2 MB of text (as HTML, quotes escaped, 12 MB),
    and the subject goes past 998 characters. 200,000 placeholders once made a reviewer's
    sample page render gigabytes in the web process."""
    quote = '"' * 2000
    rows = [
        {"address": "fine@example.com", "variables": {"name": "Ana", "order": 1}},
        {"address": "big@example.com", "variables": {"name": quote, "order": 2}},
        {"address": "long@example.com", "variables": {"name": "B", "order": "9" * 990}},
    ]
    response = api.post(
        "/broadcasts",
        body(mailbox_a, text="{{ name }}" * 1000, html="<p>{{name}}</p>" * 1000, recipients=rows),
        token=token_a,
        key="b-big",
    )

    assert response.status_code == 422
    problem = response.json()
    assert [e["field"] for e in problem["errors"]] == [
        "recipients[1].text",
        "recipients[1].html",
        "recipients[2].subject",
    ]
    assert "the text is 2000000 characters long; at most 1000000" in problem["errors"][0]["message"]
    assert "the html is 12007000 characters long" in problem["errors"][1]["message"]
    assert not Broadcast.objects.exists()


def test_template_logic_is_a_422_naming_the_field(api, token_a, mailbox_a):
    response = api.post(
        "/broadcasts", body(mailbox_a, text="{% if a %}x{% endif %}"), token=token_a, key="b-4"
    )
    assert response.status_code == 422
    assert response.json()["errors"][0]["field"] == "text"


def test_a_placeholder_in_an_unquoted_attribute_is_a_422_naming_it(api, token_a, mailbox_a):
    """Found by an outside probe: <img src={{ pic }}> let a row's value add an onerror handler."""
    html = "<p>Hello {{ name }}</p>\n<img src={{ pic }}>"
    rows = [{"address": "c@example.com", "variables": {"name": "N", "order": 1, "pic": "x"}}]
    response = api.post(
        "/broadcasts", body(mailbox_a, html=html, recipients=rows), token=token_a, key="b-h1"
    )
    assert response.status_code == 422
    problem = response.json()
    assert (problem["code"], problem["errors"][0]["field"]) == ("template_invalid", "html")
    assert problem["detail"].startswith(
        "html, line 2: {{ pic }} is in the unquoted value of the src attribute of <img>"
    )
    assert not Broadcast.objects.exists()


def test_a_link_value_that_is_not_an_http_or_mailto_url_is_a_422_naming_its_row(
    api, token_a, mailbox_a
):
    """Found by an outside probe: href="{{ link }}" sent a javascript: URL."""
    rows = [
        {"address": f"c{i}@example.com", "variables": {"name": "N", "order": i, "link": link}}
        for i, link in enumerate(["https://shop.test/1", "javascript:alert(1)"])
    ]
    html = '<a href="{{ link }}">Track {{ name }}</a>'
    response = api.post(
        "/broadcasts", body(mailbox_a, html=html, recipients=rows), token=token_a, key="b-h2"
    )
    assert response.status_code == 422
    problem = response.json()
    assert problem["code"] == "recipients_invalid"
    assert [e["field"] for e in problem["errors"]] == ["recipients[1].variables.link"]
    assert not Broadcast.objects.exists()


@pytest.mark.parametrize(
    "field,value",
    [
        ("name", "Outage\x00"),
        ("name", "Outage \ud800"),
        ("text", "Hello {{ name }} \ud800"),
        ("html", "<p>Hello {{ name }} \udfff</p>"),
        ("subject", "Order {{ order }} \ud800"),
    ],
)
def test_template_text_that_cannot_be_stored_is_a_422(api, token_a, mailbox_a, field, value):
    # json.dumps escapes a lone surrogate as \udXXX, which the server's JSON parser accepts.
    raw = json.dumps(body(mailbox_a, **{field: value}))
    response = api.post("/broadcasts", raw=raw, token=token_a, key=f"b-u-{field}-{len(value)}")
    assert (response.status_code, response.json()["code"]) == (422, "unstorable_value")
    assert not Broadcast.objects.exists()


@pytest.mark.parametrize(
    "overrides",
    [
        {
            "recipients": [
                {"address": "c\ud800@example.com", "variables": {"name": "a", "order": 1}}
            ]
        },
        {"recipients": [{"address": "c@example.com", "variables": {"name": "a", "x\ud800": "v"}}]},
        {"recipients": None, "recipients_csv": "address,name,order\nc0@example.com,N0 \ud800,0\n"},
    ],
    ids=["address", "variable name", "csv"],
)
def test_recipients_that_cannot_be_stored_are_a_422(api, token_a, mailbox_a, overrides):
    raw = json.dumps(body(mailbox_a, **overrides))
    response = api.post("/broadcasts", raw=raw, token=token_a, key="b-u-rows")
    assert response.status_code == 422
    assert not Broadcast.objects.exists()


@pytest.mark.parametrize(
    ("name", "said"),
    [
        ("Outage\u202e", "U+202E"),
        ("Out\tage", "U+0009"),
        ("Outage\x1b[31m", "U+001B"),
        ("x" * 201, "at most 200 characters"),
    ],
    ids=["bidi override", "tab", "escape", "too long"],
)
def test_a_broadcast_name_that_would_display_as_something_else_is_a_422(
    api, token_a, mailbox_a, name, said
):
    """Reviewers read the name in lists and on the broadcast's page: a right-to-left override
    or a control character made it display as something else (token, passkey and inbox names
    were refused for it, a broadcast's was not), and a long one was cut without a word."""
    response = api.post("/broadcasts", body(mailbox_a, name=name), token=token_a, key="b-name")

    problem = response.json()
    assert response.status_code == 422, response.content
    assert problem["errors"][0]["field"] == "name"
    assert said in problem["errors"][0]["message"]
    assert not Broadcast.objects.exists()


def test_a_token_restricted_to_one_mailbox_reaches_no_other_mailboxs_broadcast(
    api, make_token, tenant_a, mailbox_a, mailbox_a2
):
    only_a = make_token(tenant_a, mailboxes=[mailbox_a])
    other = broadcast_create(
        tenant=tenant_a,
        mailbox=mailbox_a2,
        subject="S {{ name }}",
        text="T",
        recipients=[{"address": "x@example.com", "variables": {"name": "x"}}],
    )
    by_address = api.post("/broadcasts", body(mailbox_a2), token=only_a, key="s-1")
    by_id = api.post(
        "/broadcasts", {**body(mailbox_a2), "mailbox": mailbox_a2.pk}, token=only_a, key="s-2"
    )
    replaced = api.client.generic(
        "PUT",
        f"/api/v1/broadcasts/{other.pk}/recipients",
        data=json.dumps({"recipients": ["evil@example.com"]}),
        content_type="application/json",
        headers={"Authorization": f"Bearer {only_a}"},
    )
    listed = api.get("/broadcasts", token=only_a).json()

    assert (by_address.status_code, by_id.status_code, replaced.status_code) == (404, 404, 404)
    assert api.get(f"/broadcasts/{other.pk}", token=only_a).status_code == 404
    assert other.pk not in [b["id"] for b in listed["items"]]
    other.refresh_from_db()
    assert (Broadcast.objects.count(), other.recipient_count) == (1, 1)


def test_replace_recipients_while_pending(api, token_a, mailbox_a):
    created = api.post("/broadcasts", body(mailbox_a), token=token_a, key="b-5").json()
    response = api.client.generic(
        "PUT",
        f"/api/v1/broadcasts/{created['id']}/recipients",
        data=json.dumps({"recipients": ["x@example.com"]}),
        content_type="application/json",
        headers={"Authorization": f"Bearer {token_a}"},
    )
    # The template uses {{ name }} and {{ order }}: plain addresses lack them.
    assert response.status_code == 422
    assert response.json()["errors"][0] == {
        "field": "recipients[0].variables.name",
        "row": 1,
        "message": "the template uses {{ name }}, not given",
    }


def test_other_tenant_gets_404(api, token_a, token_b, mailbox_a):
    created = api.post("/broadcasts", body(mailbox_a), token=token_a, key="b-6").json()
    assert api.get(f"/broadcasts/{created['id']}", token=token_b).status_code == 404
    response = api.post("/broadcasts", body(mailbox_a), token=token_b, key="b-7")
    assert response.status_code == 404
    assert response.json()["code"] == "mailbox_not_found"


def test_missing_idempotency_key_is_400(api, token_a, mailbox_a):
    assert api.post("/broadcasts", body(mailbox_a), token=token_a).status_code == 400


def test_a_csv_header_of_a_quarter_million_columns_is_a_422_at_once(api, token_a, mailbox_a):
    """Found by an outside probe: the header's check for a repeated column compared every
    column with every other (40,000 columns took 20 s of a web worker, the 4 MB a request may
    carry about an hour). A row carries at most 50 variables, so a wider header is refused
    before anything else is read of it."""
    header = "address," + ",".join(f"v{i}" for i in range(250_000))
    raw = json.dumps(body(mailbox_a, recipients=None, recipients_csv=f"{header}\n"))
    response = api.post("/broadcasts", raw=raw, token=token_a, key="b-wide-header")
    assert response.status_code == 422
    assert response.json()["errors"] == [
        {
            "field": "recipients_csv",
            "message": "the CSV header has 250001 columns; at most 51 are allowed "
            "(the address and 50 variables)",
        }
    ]
    assert not Broadcast.objects.exists()


def test_an_agent_cannot_replace_the_recipients_of_a_broadcast_a_person_posted(
    api, token_a, mailbox_a, member_of
):
    """Found by an outside probe: any token of the mailbox could swap the list of a broadcast
    a person had posted. The page names no author and four-eyes still took the person for the
    author of every row, so a colleague approved the agent's addresses as the person's."""
    author = member_of(mailbox_a.tenant, "approver").user
    posted = broadcast_create(
        tenant=mailbox_a.tenant,
        mailbox=mailbox_a,
        subject="Order {{ order }} delayed",
        text="Hello {{ name }}",
        recipients=[{"address": "ana@example.com", "variables": {"name": "Ana", "order": 1}}],
        actor_user=author,
    )
    hash_before = posted.content_hash
    swapped = [{"address": "evil@example.com", "variables": {"name": "E", "order": 1}}]

    response = api.client.generic(
        "PUT",
        f"/api/v1/broadcasts/{posted.pk}/recipients",
        data=json.dumps({"recipients": swapped}),
        content_type="application/json",
        headers={"Authorization": f"Bearer {token_a}"},
    )

    assert response.status_code == 403
    assert response.json()["code"] == "broadcast_posted_by_person"
    posted.refresh_from_db()
    assert posted.content_hash == hash_before
    assert list(posted.recipients.values_list("address", flat=True)) == ["ana@example.com"]
    assert not IntentEvent.objects.filter(action="broadcast.recipients_replaced").exists()


@pytest.mark.parametrize("literal", ["19.90", "1E2", "0.1e1", "12345678901234567890.5", "2.0"])
def test_a_value_written_as_a_decimal_number_is_a_422_not_sent_as_python_writes_it(
    api, token_a, mailbox_a, literal
):
    """Found by an outside probe: a JSON number with a decimal point or an exponent became the
    text Python writes for the float it parses to, so a price the agent wrote 19.90 reached the
    customers as 19.9, 1E2 as 100.0 and a long reference as 1.2345678901234567e+19, and the
    approver saw the first row only. The agent is told to write such a value as text."""
    rows = [{"address": "c0@example.com", "variables": {"price": "PRICE"}}]
    raw = json.dumps(
        body(mailbox_a, text="Total: {{ price }}", subject="Your order", recipients=rows)
    ).replace('"PRICE"', literal)
    response = api.post("/broadcasts", raw=raw, token=token_a, key=f"b-float-{literal}")

    assert response.status_code == 422, response.content
    [error] = response.json()["errors"]
    assert error["field"] == "recipients[0].variables.price"
    assert "write it as text" in error["message"]
    assert not Broadcast.objects.exists()
