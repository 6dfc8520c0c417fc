"""``strict_json.values_over``: the count of values that bounds a body's parse before it starts."""

from __future__ import annotations

import json

import pytest

from common import strict_json


def _counts(text: str) -> tuple[int, int]:
    """(commas between values, values): counted on the parsed value, each non-empty container
    having one comma fewer than its items or members."""
    stack, separators, values = [json.loads(text)], 0, 0
    while stack:
        item = stack.pop()
        if isinstance(item, (dict, list)) and item:
            values += len(item)
            separators += len(item) - 1
            stack.extend(item.values() if isinstance(item, dict) else item)
    return separators, values


@pytest.mark.parametrize(
    "text",
    [
        "[" + ",".join(["0"] * 10) + "]",
        '{"a": [1, 2, {"b": 3, "c": [4, 5]}], "d": "x,y,z"}',
        json.dumps([{"address": f"a{i}@example.com", "variables": {"n": "1,2"}} for i in range(9)]),
        '["\\"a,b\\"", "c\\\\", ",", "d"]',
    ],
)
def test_over_a_limit_up_to_the_commas_between_values_and_never_at_the_values(text):
    separators, values = _counts(text)

    for limit in range(1, values + 3):
        over = strict_json.values_over(text, limit)
        if limit <= separators:
            assert over, limit
        if limit >= values:
            assert not over, limit


def test_commas_inside_strings_are_not_values():
    text = json.dumps({"text": "," * 50_000, "more": ["a,b"] * 10})

    assert not strict_json.values_over(text, 100)
    assert strict_json.loads(text, max_depth=4, max_values=100)["more"][0] == "a,b"


def test_escaped_quotes_do_not_end_a_string():
    text = json.dumps(['say "a,b,c,d,e,f" twice', "\\", ",,,,,,"])

    assert not strict_json.values_over(text, 3)
    assert strict_json.values_over(json.dumps([0, 0, 0, 0]), 3)


def test_a_text_of_more_strings_than_twice_the_limit_is_over_it_without_looking_further():
    text = json.dumps(["a"] * 21)

    assert strict_json.values_over(text, 10)


def test_a_text_over_the_limit_is_refused_naming_it():
    with pytest.raises(strict_json.JSONRefused) as refused:
        strict_json.loads("[" + "0," * 10 + "0]", max_depth=4, max_values=10)

    assert refused.value.code == "too_many_values"
    assert refused.value.message == (
        "the body holds more than 10 values (items of arrays and members of objects)"
    )
    assert strict_json.loads("[" + "0," * 9 + "0]", max_depth=4, max_values=11) == [0] * 10
