import hashlib

from intents.hashing import (
    HASH_SCHEME,
    canonical_content,
    content_hash,
    format_hash,
    scheme_of,
    version_hash,
)

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


def test_hash_is_sha256_hex_under_its_scheme():
    scheme, _, digest = content_hash(**BASE).rpartition(":")
    assert scheme == str(HASH_SCHEME)
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


# Known answers: fixed inputs, fixed bytes and digests. Every stored approval was hashed this way;
# if one of these changes, stored versions stop matching and their sends are blocked. A change to
# the canonical form is a new scheme (intents/hashing.py), never an edit of scheme 1.
SCHEME_1_BASE_CANONICAL = (
    b'{"attachments":[],"bcc":[],"cc":[],"html":"","in_reply_to":"","mailbox_id":7,"scheme":1,'
    b'"subject":"Hello","text":"Body","to":["a@example.com"]}'
)
SCHEME_1_BASE_DIGEST = "3d99fb41122249bdfc2a2ac5f5dee94b75fcd804418d911909aea26a2f9fba72"

FULL = {
    "mailbox_id": 42,
    "to": [" Zoë@Example.com ", "b@example.com"],
    "cc": ["C@example.com"],
    "bcc": ["d@example.com", "a@example.com"],
    "subject": "Réponse \u2013 commande n°7",
    "text": "Bonjour,\nMerci.\n",
    "html": "<p>Bonjour</p>",
    "in_reply_to": "<m1@example.com>",
    "attachments": [("z.pdf", "ff" * 32), ("a.txt", "00" * 32)],
}
SCHEME_1_FULL_CANONICAL = (
    '{"attachments":[["a.txt","' + "00" * 32 + '"],["z.pdf","' + "ff" * 32 + '"]],'
    '"bcc":["a@example.com","d@example.com"],"cc":["c@example.com"],"html":"<p>Bonjour</p>",'
    '"in_reply_to":"<m1@example.com>","mailbox_id":42,"scheme":1,'
    '"subject":"Réponse \u2013 commande n°7","text":"Bonjour,\\nMerci.\\n",'
    '"to":["b@example.com","zoë@example.com"]}'
).encode("utf-8")
SCHEME_1_FULL_DIGEST = "6487db99e070e442ada14290dab21c9a9d56bfbbdc861a161fb7eaf244013be8"


def test_scheme_1_canonical_form_is_pinned():
    assert canonical_content(scheme=1, **BASE) == SCHEME_1_BASE_CANONICAL
    assert canonical_content(scheme=1, **FULL) == SCHEME_1_FULL_CANONICAL


def test_scheme_1_digests_are_pinned():
    assert content_hash(scheme=1, **BASE) == SCHEME_1_BASE_DIGEST
    assert content_hash(scheme=1, **FULL) == SCHEME_1_FULL_DIGEST
    assert hashlib.sha256(SCHEME_1_FULL_CANONICAL).hexdigest() == SCHEME_1_FULL_DIGEST


# Scheme 2 (attachments: filename, content type and sha256): the known answers of the scheme new
# versions are hashed with since attachments shipped.
SCHEME_2_BASE_CANONICAL = (
    b'{"attachments":[],"bcc":[],"cc":[],"html":"","in_reply_to":"","mailbox_id":7,"scheme":2,'
    b'"subject":"Hello","text":"Body","to":["a@example.com"]}'
)
SCHEME_2_BASE_DIGEST = "2:82dcd1eed4ed9c49bdadac531cccec3ef77d50e9b124f4f9fc76772156003bfb"
FULL_2 = {
    **FULL,
    "attachments": [("z.pdf", "application/pdf", "ff" * 32), ("a.txt", "text/plain", "00" * 32)],
}
SCHEME_2_FULL_CANONICAL = (
    '{"attachments":[["a.txt","text/plain","' + "00" * 32 + '"],'
    '["z.pdf","application/pdf","' + "ff" * 32 + '"]],'
    '"bcc":["a@example.com","d@example.com"],"cc":["c@example.com"],"html":"<p>Bonjour</p>",'
    '"in_reply_to":"<m1@example.com>","mailbox_id":42,"scheme":2,'
    '"subject":"Réponse \u2013 commande n°7","text":"Bonjour,\\nMerci.\\n",'
    '"to":["b@example.com","zoë@example.com"]}'
).encode("utf-8")
SCHEME_2_FULL_DIGEST = "2:1c477e128e886573ca7b43101fa036c232a23c20e3849176e37486457cece653"


def test_scheme_2_canonical_form_and_digests_are_pinned():
    assert canonical_content(scheme=2, **BASE) == SCHEME_2_BASE_CANONICAL
    assert canonical_content(scheme=2, **FULL_2) == SCHEME_2_FULL_CANONICAL
    assert content_hash(**BASE) == SCHEME_2_BASE_DIGEST
    assert content_hash(**FULL_2) == SCHEME_2_FULL_DIGEST
    assert "2:" + hashlib.sha256(SCHEME_2_FULL_CANONICAL).hexdigest() == SCHEME_2_FULL_DIGEST


def test_scheme_2_attachment_type_name_and_digest_change_the_hash_but_order_does_not():
    swapped = {**FULL_2, "attachments": list(reversed(FULL_2["attachments"]))}
    assert content_hash(**swapped) == SCHEME_2_FULL_DIGEST
    retyped = [("z.pdf", "text/html", "ff" * 32), ("a.txt", "text/plain", "00" * 32)]
    renamed = [("y.pdf", "application/pdf", "ff" * 32), ("a.txt", "text/plain", "00" * 32)]
    redigested = [("z.pdf", "application/pdf", "ee" * 32), ("a.txt", "text/plain", "00" * 32)]
    digests = {content_hash(**{**FULL_2, "attachments": a}) for a in (retyped, renamed, redigested)}
    assert len(digests | {SCHEME_2_FULL_DIGEST}) == 4


def test_the_current_scheme_is_2_and_scheme_1_hashes_stay_bare_hex():
    # Versions stored before attachments carry a bare scheme-1 digest and still verify; moving
    # HASH_SCHEME on again must come with a new known-answer test for the new scheme.
    assert HASH_SCHEME == 2
    assert format_hash(1, SCHEME_1_BASE_DIGEST) == SCHEME_1_BASE_DIGEST
    assert format_hash(2, SCHEME_1_BASE_DIGEST) == "2:" + SCHEME_1_BASE_DIGEST


def test_missing_in_reply_to_and_a_numeric_string_mailbox_hash_like_the_plain_values():
    assert content_hash(**{**BASE, "in_reply_to": None}) == SCHEME_2_BASE_DIGEST
    assert content_hash(**{**BASE, "mailbox_id": "7"}) == SCHEME_2_BASE_DIGEST


def test_attachment_order_does_not_matter_but_names_and_digests_do():
    swapped = {**FULL, "attachments": list(reversed(FULL["attachments"]))}
    assert content_hash(scheme=1, **swapped) == SCHEME_1_FULL_DIGEST
    renamed = {**FULL, "attachments": [("y.pdf", "ff" * 32), ("a.txt", "00" * 32)]}
    other_digest = {**FULL, "attachments": [("z.pdf", "ee" * 32), ("a.txt", "00" * 32)]}
    hashes = {content_hash(scheme=1, **renamed), content_hash(scheme=1, **other_digest)}
    assert len(hashes | {SCHEME_1_FULL_DIGEST}) == 3


def test_a_stored_hash_names_its_scheme():
    assert scheme_of(SCHEME_1_BASE_DIGEST) == 1
    assert scheme_of(SCHEME_2_BASE_DIGEST) == 2
    # "1:" is not a form of scheme 1 (that is bare hex); no scheme 3 exists yet.
    assert scheme_of("1:" + SCHEME_1_BASE_DIGEST) is None
    assert scheme_of("3:" + SCHEME_1_BASE_DIGEST) is None
    for garbage in (
        "",
        SCHEME_1_BASE_DIGEST[:-1],
        SCHEME_1_BASE_DIGEST + "0",
        SCHEME_1_BASE_DIGEST.upper(),
        " " + SCHEME_1_BASE_DIGEST,
        "x:" + SCHEME_1_BASE_DIGEST,
        "01:" + SCHEME_1_BASE_DIGEST,
    ):
        assert scheme_of(garbage) is None, garbage


class _Draft:
    def __init__(self, mailbox_id, in_reply_to):
        self.mailbox_id, self.in_reply_to = mailbox_id, in_reply_to


class _Rows(list):
    def all(self):
        return self


class _Attachment:
    def __init__(self, filename, content_type, sha256):
        self.filename, self.content_type, self.sha256 = filename, content_type, sha256


class _Version:
    """The fields of a stored DraftVersion that version_hash reads (plain data, no database)."""

    def __init__(self, content_hash, content=BASE):
        self.attachments = _Rows(_Attachment(*a) for a in content.get("attachments", ()))
        self.draft = _Draft(content["mailbox_id"], content["in_reply_to"])
        self.content_hash = content_hash
        self.to, self.cc, self.bcc = content["to"], content["cc"], content["bcc"]
        self.subject, self.text, self.html = content["subject"], content["text"], content["html"]


def test_version_hash_recomputes_a_stored_scheme_1_version():
    assert version_hash(_Version(SCHEME_1_BASE_DIGEST)) == SCHEME_1_BASE_DIGEST
    # Every field comes from the version and its draft (attachments are not stored yet).
    full = {**FULL, "attachments": ()}
    expected = content_hash(scheme=1, **full)
    assert version_hash(_Version(expected, full)) == expected
    for field, value in [("in_reply_to", ""), ("mailbox_id", 43), ("html", ""), ("bcc", [])]:
        assert version_hash(_Version(expected, {**full, field: value})) != expected, field


def test_version_hash_recomputes_a_scheme_2_version_with_its_attachment_rows():
    assert version_hash(_Version(SCHEME_2_FULL_DIGEST, FULL_2)) == SCHEME_2_FULL_DIGEST
    relabelled = [("z.pdf", "text/html", "ff" * 32), ("a.txt", "text/plain", "00" * 32)]
    changed = _Version(SCHEME_2_FULL_DIGEST, {**FULL_2, "attachments": relabelled})
    assert version_hash(changed) != SCHEME_2_FULL_DIGEST


def test_a_stored_hash_in_no_known_scheme_never_verifies():
    for stored in ("", None, "3:" + SCHEME_1_BASE_DIGEST, SCHEME_1_BASE_DIGEST.upper()):
        recomputed = version_hash(_Version(stored))
        assert recomputed == SCHEME_2_BASE_DIGEST
        assert recomputed != stored
