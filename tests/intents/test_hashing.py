from intents.hashing import content_hash

BASE = {
    "mailbox_id": 7,
    "to": ["a@example.com"],
    "cc": [],
    "bcc": [],
    "subject": "Hello",
    "text": "Body",
    "html": "",
    "in_reply_to": "",
}


def test_hash_is_sha256_hex():
    digest = content_hash(**BASE)
    assert len(digest) == 64
    assert int(digest, 16) >= 0


def test_order_and_case_of_addresses_do_not_matter():
    one = content_hash(**{**BASE, "to": ["B@example.com", "a@example.com"]})
    two = content_hash(**{**BASE, "to": ["a@example.com", "b@example.com"]})
    assert one == two


def test_every_approved_field_changes_the_hash():
    base = content_hash(**BASE)
    changes = [
        {"mailbox_id": 8},
        {"to": ["c@example.com"]},
        {"cc": ["a@example.com"]},
        {"bcc": ["a@example.com"]},
        {"subject": "Hello!"},
        {"text": "Body."},
        {"html": "<p>Body</p>"},
        {"in_reply_to": "<m1@example.com>"},
    ]
    digests = {content_hash(**{**BASE, **change}) for change in changes}
    assert base not in digests
    assert len(digests) == len(changes)


def test_moving_an_address_from_to_to_cc_changes_the_hash():
    moved = content_hash(**{**BASE, "to": [], "cc": ["a@example.com"]})
    assert moved != content_hash(**BASE)
