"""Every detail a journal or audit row is written with has a name the reader's language shows:
without one, a German page printed the key itself ("content hash", "api key id")."""

import ast
import pathlib

from console.audit_vocabulary import FIELD_NAMES, HIDDEN_KEYS, STRUCTURAL_KEYS

APPS = ("intents", "webhooks", "tenants", "mailboxes", "review", "console", "agent_api", "common")
# The calls that write a journal or audit row, and the keyword that carries its details.
WRITERS = {"Entry", "journal", "audit", "journal_many", "signin_audit"}


def _written_keys() -> dict[str, str]:
    root = pathlib.Path(__file__).resolve().parents[2]
    found: dict[str, str] = {}
    for app in APPS:
        for path in (root / app).rglob("*.py"):
            if "migrations" in path.parts:
                continue
            for node in ast.walk(ast.parse(path.read_text())):
                if not isinstance(node, ast.Call):
                    continue
                func = node.func
                name = func.id if isinstance(func, ast.Name) else getattr(func, "attr", "")
                if name not in WRITERS:
                    continue
                for keyword in node.keywords:
                    if keyword.arg == "data" and isinstance(keyword.value, ast.Dict):
                        for key in keyword.value.keys:
                            if isinstance(key, ast.Constant) and isinstance(key.value, str):
                                found.setdefault(key.value, str(path.relative_to(root)))
    return found


def test_the_scan_finds_the_details_it_is_meant_to_find():
    written = _written_keys()
    assert {"content_hash", "pod_id", "provider_message_id"} <= set(written)


def test_every_detail_written_has_a_name():
    unnamed = {
        key: where
        for key, where in _written_keys().items()
        if key not in FIELD_NAMES and key not in HIDDEN_KEYS and key not in STRUCTURAL_KEYS
    }
    assert unnamed == {}, "give these details a name in console.audit_vocabulary.FIELD_NAMES"
