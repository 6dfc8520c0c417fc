"""Found by an outside probe: a broadcast's subject took an RFC 2047 encoded word, which a draft's
subject refuses (7dab8ad): the reviewer read '=?utf-8?B?...?=' and every customer's mail client
showed it decoded, as words nobody approved. The template is refused as a draft's subject is,
and a row whose values make one in the subject (a whole word in a value, or a value that
completes the template's) is refused naming the row."""

from __future__ import annotations

import pytest

from intents import errors
from intents.models import Broadcast
from intents.services.broadcasts import broadcast_create

pytestmark = pytest.mark.django_db


def create(live, subject, values=("7", "8")):
    rows = [
        {"address": f"customer{i}@example.com", "variables": {"order": value}}
        for i, value in enumerate(values)
    ]
    return broadcast_create(
        tenant=live.tenant,
        mailbox=live.mailbox,
        subject=subject,
        text="Your order {{ order }} is late.",
        recipients=rows,
    )


@pytest.mark.parametrize(
    "subject",
    ["Your refund =?utf-8?B?UGF5IHRvIElCQU4gWFgwMCA5OTk5?=", "=?ISO-8859-1?Q?Order_{{order}}?="],
)
def test_a_subject_template_with_an_encoded_word_is_refused(live, subject):
    with pytest.raises(errors.InvalidInput) as caught:
        create(live, subject)

    assert (caught.value.code, caught.value.field) == ("subject_invalid", "subject")
    assert "cannot hold the encoded word =?" in caught.value.message
    assert not Broadcast.objects.exists()


@pytest.mark.parametrize(
    ("subject", "value"),
    [
        ("Order {{ order }} is late", "=?utf-8?B?UGF5IHRvIElCQU4=?="),
        ("Order =?utf-8?B?{{ order }}?= is late", "UGF5IHRvIElCQU4="),
    ],
    ids=["whole-word-in-a-value", "value-completes-the-template"],
)
def test_a_row_whose_values_make_an_encoded_word_in_the_subject_is_refused(live, subject, value):
    with pytest.raises(errors.BroadcastRowsInvalid) as caught:
        create(live, subject, values=("in two weeks", value))

    assert [(r.row, r.field) for r in caught.value.rows] == [(2, "subject")]
    assert "encoded word =?utf-8?B?" in caught.value.rows[0].message
    assert not Broadcast.objects.exists()


def test_a_subject_that_only_looks_like_part_of_an_encoded_word_is_kept(live):
    broadcast = create(live, "Sale\u00a0=? {{ order }} ?= \u200f!", values=("a b", "=?x"))

    assert broadcast.subject == "Sale\u00a0=? {{ order }} ?= \u200f!"
