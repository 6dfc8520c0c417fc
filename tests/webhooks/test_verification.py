"""verify_delivery on its own: every refusal names its reason, the limits sit where they are
documented, and a broken stored secret never hides a good one (no database, no HTTP)."""

from __future__ import annotations

import json
import logging
from datetime import UTC, datetime, timedelta

import pytest
from django.test import RequestFactory
from svix.webhooks import Webhook

from tests.webhooks.conftest import new_secret, new_svix_id
from webhooks.verification import (
    MAX_JSON_DEPTH,
    SVIX_ID_MAX_LENGTH,
    VerificationFailed,
    meta_signature_headers,
    signature_headers,
    verify_delivery,
)

BODY = json.dumps({"type": "event", "event_type": "message.delivered"}, separators=(",", ":"))


def signed(body: str, *, secret: str, svix_id: str | None = None, at=None, prefix="svix"):
    svix_id = svix_id or new_svix_id()
    at = at or datetime.now(UTC)
    return {
        f"{prefix}-id": svix_id,
        f"{prefix}-timestamp": str(int(at.timestamp())),
        f"{prefix}-signature": Webhook(secret).sign(svix_id, at, body),
    }


def refusal(*, secrets, body, headers) -> str:
    with pytest.raises(VerificationFailed) as caught:
        verify_delivery(secrets=secrets, body=body, headers=headers)
    assert str(caught.value) == caught.value.reason
    return caught.value.reason


def test_a_correctly_signed_delivery_returns_its_id_and_payload():
    secret = new_secret()
    headers = signed(BODY, secret=secret, svix_id="msg_1")

    delivery = verify_delivery(secrets=[secret], body=BODY.encode(), headers=headers)

    assert delivery.svix_id == "msg_1"
    assert delivery.payload == json.loads(BODY)


def test_standard_webhooks_header_names_are_accepted_and_give_the_id():
    secret = new_secret()
    headers = signed(BODY, secret=secret, svix_id="msg_std", prefix="webhook")

    assert verify_delivery(secrets=[secret], body=BODY.encode(), headers=headers).svix_id == (
        "msg_std"
    )


def test_header_names_are_matched_without_regard_to_case():
    secret = new_secret()
    headers = {k.title(): v for k, v in signed(BODY, secret=secret, svix_id="msg_c").items()}

    assert verify_delivery(secrets=[secret], body=BODY.encode(), headers=headers).svix_id == "msg_c"


def test_signature_headers_keeps_only_the_verification_headers_lower_cased():
    headers = {
        "Svix-Id": "a",
        "SVIX-TIMESTAMP": "b",
        "svix-signature": "c",
        "Webhook-Id": "d",
        "webhook-timestamp": "e",
        "Webhook-Signature": "f",
        "Content-Type": "application/json",
        "X-Svix-Id": "g",
    }

    assert signature_headers(headers) == {
        "svix-id": "a",
        "svix-timestamp": "b",
        "svix-signature": "c",
        "webhook-id": "d",
        "webhook-timestamp": "e",
        "webhook-signature": "f",
    }


def test_the_second_secret_of_a_rotation_verifies():
    old, current = new_secret(), new_secret()
    headers = signed(BODY, secret=old)

    assert verify_delivery(secrets=[current, old], body=BODY.encode(), headers=headers).payload


@pytest.mark.parametrize("broken", ["whsec_", "", "whsec_!!!not-base64!!!"])
def test_an_unusable_stored_secret_next_to_a_good_one_still_verifies(broken, caplog):
    good = new_secret()
    headers = signed(BODY, secret=good, svix_id="msg_ok")

    with caplog.at_level(logging.ERROR, logger="webhooks.verification"):
        delivery = verify_delivery(secrets=[broken, good], body=BODY.encode(), headers=headers)

    assert delivery.svix_id == "msg_ok"
    assert [r.getMessage() for r in caplog.records] == ["webhooks.secret.unusable"]
    # The log names the problem, never the secret.
    assert good not in caplog.text


def test_an_unusable_secret_before_a_wrong_one_refuses_as_a_bad_signature():
    headers = signed(BODY, secret=new_secret())

    assert refusal(secrets=["whsec_", new_secret()], body=BODY.encode(), headers=headers) == (
        "bad_signature"
    )


def test_only_unusable_secrets_or_none_refuse_as_no_secret():
    headers = signed(BODY, secret=new_secret())

    assert refusal(secrets=["whsec_"], body=BODY.encode(), headers=headers) == "no_secret"
    assert refusal(secrets=[], body=BODY.encode(), headers=headers) == "no_secret"


def test_svix_id_of_100_characters_is_accepted_and_101_refused():
    secret = new_secret()
    at_limit = "m" * SVIX_ID_MAX_LENGTH
    over = "m" * (SVIX_ID_MAX_LENGTH + 1)
    assert SVIX_ID_MAX_LENGTH == 100

    delivery = verify_delivery(
        secrets=[secret], body=BODY.encode(), headers=signed(BODY, secret=secret, svix_id=at_limit)
    )
    assert delivery.svix_id == at_limit
    headers = signed(BODY, secret=secret, svix_id=over)
    assert refusal(secrets=[secret], body=BODY.encode(), headers=headers) == "svix_id_too_long"


def test_an_overlong_svix_id_with_a_bad_signature_is_a_bad_signature():
    # The length is judged only on a delivery that verified: forgers learn nothing from it.
    headers = signed(BODY, secret=new_secret(), svix_id="m" * 101)

    assert refusal(secrets=[new_secret()], body=BODY.encode(), headers=headers) == "bad_signature"


def _without(headers, name):
    return {k: v for k, v in headers.items() if k != name}


def _with(headers, **changes):
    return {**headers, **{k.replace("_", "-"): v for k, v in changes.items()}}


def test_each_refusal_names_its_reason():
    secret = new_secret()
    good = signed(BODY, secret=secret)
    now = datetime.now(UTC)
    cases = {
        "body_not_utf8": (b"\xff\xfe" + BODY.encode(), good),
        "missing_headers": (BODY.encode(), _without(good, "svix-id")),
        "bad_signature": (BODY.encode(), signed(BODY, secret=new_secret())),
        "timestamp_too_old": (
            BODY.encode(),
            signed(BODY, secret=secret, at=now - timedelta(minutes=6)),
        ),
        "timestamp_too_new": (
            BODY.encode(),
            signed(BODY, secret=secret, at=now + timedelta(minutes=6)),
        ),
        "bad_timestamp": (BODY.encode(), _with(good, svix_timestamp="soon")),
        "malformed_signature": (BODY.encode(), _with(good, svix_signature="v1")),
    }
    for expected, (body, headers) in cases.items():
        assert refusal(secrets=[secret], body=body, headers=headers) == expected, expected


def test_a_missing_signature_or_timestamp_with_an_id_is_missing_headers():
    secret = new_secret()
    good = signed(BODY, secret=secret)

    for name in ("svix-signature", "svix-timestamp"):
        headers = _without(good, name)
        assert refusal(secrets=[secret], body=BODY.encode(), headers=headers) == "missing_headers"
    assert refusal(secrets=[secret], body=BODY.encode(), headers={}) == "missing_headers"
    # Judged before any secret is tried: the same answer with no usable secret at all.
    without_id = _without(good, "svix-id")
    for secrets in ([], ["whsec_"]):
        assert refusal(secrets=secrets, body=BODY.encode(), headers=without_id) == (
            "missing_headers"
        )


def test_a_signature_that_is_not_base64_is_malformed():
    secret = new_secret()
    headers = _with(signed(BODY, secret=secret), svix_signature="v1,abc")

    assert refusal(secrets=[secret], body=BODY.encode(), headers=headers) == "malformed_signature"


def test_the_last_secrets_reason_is_the_one_returned():
    secret = new_secret()
    headers = _with(signed(BODY, secret=secret), svix_signature="v1")

    # The wrong first secret fails on the malformed entry too; a broken last one changes nothing.
    assert refusal(
        secrets=[new_secret(), secret, "whsec_"], body=BODY.encode(), headers=headers
    ) == ("malformed_signature")


@pytest.mark.parametrize(
    ("body", "reason"),
    [
        ("not json", "body_not_json"),
        ("[1, 2]", "body_not_object"),
        ('"text"', "body_not_object"),
        ('{"type": "message.delivered", "n": 1e400}', "number_not_finite"),
        ('{"type": "message.delivered", "n": -1e400}', "number_not_finite"),
        ('{"type": "message.delivered", "n": NaN}', "number_not_finite"),
        ('{"type": "message.delivered", "n": [Infinity]}', "number_not_finite"),
    ],
)
def test_a_signed_body_that_is_not_a_json_object_is_refused(body, reason):
    secret = new_secret()

    assert refusal(secrets=[secret], body=body.encode(), headers=signed(body, secret=secret)) == (
        reason
    )


@pytest.mark.parametrize(
    "svix_id", ["msg_\x00nul", "msg\t1", "msg_\x7f", "msg_\u00e9", "msg_\u2028"]
)
def test_a_signed_svix_id_with_a_control_or_non_ascii_character_is_malformed(svix_id):
    # Printable but not ASCII (é) and ASCII but not printable (NUL, tab, DEL): both refused.
    secret = new_secret()
    headers = signed(BODY, secret=secret, svix_id=svix_id)

    assert refusal(secrets=[secret], body=BODY.encode(), headers=headers) == "malformed_svix_id"


def _nested_objects(levels: int) -> str:
    """A JSON object ``levels`` deep: the outer object is level 1."""
    return '{"a":' * (levels - 1) + "{}" + "}" * (levels - 1)


def _object_of_nested_arrays(levels: int) -> str:
    """An object holding arrays in arrays, ``levels`` deep in all (beside a shallow sibling)."""
    return '{"x":1,"b":[],"a":' + "[" * (levels - 1) + "]" * (levels - 1) + "}"


def _accepts(body: str) -> dict:
    secret = new_secret()
    return verify_delivery(
        secrets=[secret], body=body.encode(), headers=signed(body, secret=secret)
    ).payload


def _refuses(body: str) -> str:
    secret = new_secret()
    return refusal(secrets=[secret], body=body.encode(), headers=signed(body, secret=secret))


@pytest.mark.parametrize("build", [_nested_objects, _object_of_nested_arrays])
def test_a_body_nested_exactly_to_the_limit_is_accepted_and_one_deeper_refused(build):
    assert MAX_JSON_DEPTH == 32

    assert _accepts(build(MAX_JSON_DEPTH)) == json.loads(build(MAX_JSON_DEPTH))
    assert _refuses(build(MAX_JSON_DEPTH + 1)) == "body_too_deep"


def test_a_shallow_object_with_many_siblings_is_accepted():
    body = json.dumps({"a": [{"b": [1, {"c": {}}]}, {"d": []}], "e": {"f": [[], [[]]]}})

    assert _accepts(body) == json.loads(body)


def test_a_body_too_deep_for_the_json_parser_itself_is_refused_as_too_deep():
    # Python's json raises RecursionError, not ValueError, long before this depth.
    body = '{"a":' + "[" * 100_000 + "]" * 100_000 + "}"

    assert _refuses(body) == "body_too_deep"


def test_a_body_of_too_many_values_is_refused_before_it_is_parsed():
    body = '{"type": "event", "data": [' + "0," * 200_000 + "0]}"

    assert _refuses(body) == "body_too_many_values"


def test_the_headers_read_from_meta_are_those_request_headers_gives():
    request = RequestFactory().post(
        "/webhooks/x/",
        data=b"{}",
        content_type="application/json",
        headers={
            "Svix-Id": "msg_1",
            "svix-timestamp": "1",
            "SVIX-SIGNATURE": "v1,x",
            "webhook-id": "msg_2",
            "X-Other": "ignored",
        },
    )
    from_meta = meta_signature_headers(request.META)
    assert from_meta == signature_headers(request.headers)
    assert from_meta == {
        "svix-id": "msg_1",
        "svix-timestamp": "1",
        "svix-signature": "v1,x",
        "webhook-id": "msg_2",
    }
