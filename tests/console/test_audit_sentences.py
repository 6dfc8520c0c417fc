"""Every action the code writes to either journal reads as its own sentence on the audit page
(console.audit_vocabulary.SENTENCES), never as the fallback "Someone: created,": the guard below
scans the product code for the actions it can write. And a broadcast's rows name who did what
to which broadcast, in the reader's language."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest
from django.urls import reverse
from django.utils.html import strip_tags

from console.audit_vocabulary import FAMILIES, SENTENCES
from console.audit_words import has_sentence
from intents.services.assignment import draft_take
from intents.services.broadcast_controls import broadcast_cancel, broadcast_pause
from intents.services.broadcasts import broadcast_approve, broadcast_create
from intents.services.drafts import draft_create
from intents.services.notes import draft_note_add

ROOT = Path(__file__).resolve().parents[2]
# The apps whose code writes journal rows (IntentEvent, AuditEvent); tests, the reliability
# harness and the benchmarks are not the product.
PRODUCT = (
    "agent_api",
    "common",
    "console",
    "intents",
    "mailboxes",
    "review",
    "tenants",
    "webhooks",
)
# The namespaces of the journals' actions. A literal in one of them anywhere in the code is taken
# for an action, wherever it flows from (a constant, a tuple, a helper's positional argument).
NAMESPACES = (
    "agent_events|broadcast|delivery|draft|intent|invitation|mailbox|member|signin|suppression"
    "|tenant|token|user|webhook"
)
ACTION = re.compile(rf"^({NAMESPACES})\.[a-z_]+$")
# A dotted literal passed as ``action=`` is an action whatever its namespace: a new namespace
# shows up here before anyone adds it to NAMESPACES.
DOTTED = re.compile(r"^[a-z_]+\.[a-z_]+$")
# Namespaced literals that are not journal actions: the agent event types (intents.events) share
# the names of the actions they report, and one has no action of its own.
NOT_ACTIONS = {"draft.edited"}
# The actions written with a computed code, by the code that computes them, and what it can be.
COMPUTED = {
    "f'mailbox.{('enabled' if status == 'active' else 'disabled')}'": [
        "mailbox.enabled",
        "mailbox.disabled",
    ],
    # tenants.two_factor.two_factor_remove(reason=...): its callers pass these.
    "f'signin.two_factor_{reason}'": [
        "signin.two_factor_removed",
        "signin.two_factor_reset",
        "signin.two_factor_operator_reset",
    ],
    # A delivery's state: the DELIVERY family's sentence reads every one (FAMILIES).
    "f'delivery.{normalized.kind.value}'": ["delivery.delivered"],
}


def _written_actions() -> tuple[dict[str, str], list[str]]:
    """(action -> where it is written, the computed codes nobody listed in COMPUTED)."""
    found: dict[str, str] = {}
    unlisted: list[str] = []
    for app in PRODUCT:
        for path in sorted((ROOT / app).rglob("*.py")):
            if "migrations" in path.parts or path.name in ("audit_words.py", "audit_vocabulary.py"):
                continue
            where = str(path.relative_to(ROOT))
            tree = ast.parse(path.read_text(), filename=where)
            # The literal parts of a computed code are not actions of their own.
            parts = {
                id(part)
                for node in ast.walk(tree)
                if isinstance(node, ast.JoinedStr)
                for part in node.values
            }
            for node in ast.walk(tree):
                if id(node) in parts:
                    continue
                if isinstance(node, ast.Constant) and isinstance(node.value, str):
                    if ACTION.match(node.value) and node.value not in NOT_ACTIONS:
                        found.setdefault(node.value, f"{where}:{node.lineno}")
                elif isinstance(node, ast.JoinedStr) and node.values:
                    head = node.values[0]
                    if isinstance(head, ast.Constant) and re.match(
                        rf"^({NAMESPACES})\.", head.value
                    ):
                        code = ast.unparse(node)
                        if code in COMPUTED:
                            for action in COMPUTED[code]:
                                found.setdefault(action, f"{where}:{node.lineno}")
                        else:
                            unlisted.append(f"{where}:{node.lineno} {code}")
                elif isinstance(node, ast.keyword) and node.arg == "action":
                    for value in ast.walk(node.value):
                        if (
                            id(value) not in parts
                            and isinstance(value, ast.Constant)
                            and isinstance(value.value, str)
                            and DOTTED.match(value.value)
                        ):
                            found.setdefault(value.value, f"{where}:{value.lineno}")
    return found, unlisted


def test_the_scan_finds_the_actions_it_is_meant_to_find():
    """The guard is only as good as its scan: the actions written through a helper's positional
    argument, a constant and a computed code are among those it finds."""
    found, _ = _written_actions()
    for action in (
        "broadcast.created",  # action= in a service
        "broadcast.fan_out_page",  # one branch of a conditional
        "draft.taken",  # a helper's positional argument
        "signin.reauthenticated",  # a module constant
        "signin.two_factor_operator_reset",  # a computed code, by COMPUTED
    ):
        assert action in found, action


def test_every_action_the_code_writes_has_a_sentence_on_the_audit_page():
    found, unlisted = _written_actions()

    assert unlisted == [], "an action written with a computed code: list what it can be in COMPUTED"
    missing = {action: where for action, where in found.items() if not has_sentence(action)}
    assert missing == {}, (
        "an action with no sentence reads as 'Someone: created' on the audit page: "
        "add it to console.audit_vocabulary.SENTENCES"
    )


def test_every_sentence_is_of_an_action_the_code_writes():
    """A sentence whose action nobody writes any more is a renamed action's leftover."""
    found, _ = _written_actions()

    assert sorted(set(SENTENCES) - set(found)) == []
    assert FAMILIES == ("delivery.",)


# --- a broadcast on the audit page -------------------------------------------------------------


def _sentences(client, tenant) -> list[str]:
    html = client.get(reverse("admin_audit", args=[tenant.slug])).content.decode()
    rows = re.findall(r"<td data-sentence>(.*?)</td>", html, flags=re.S)
    return [" ".join(strip_tags(row).split()) for row in rows]


@pytest.fixture
def broadcast_story(tenant_a, member_of, mailbox_factory):
    """A broadcast an admin created, approved, paused and cancelled."""
    admin = member_of(tenant_a, "admin", user__full_name="Ana Admin").user
    broadcast = broadcast_create(
        tenant=tenant_a,
        mailbox=mailbox_factory(tenant_a),
        name="Spring sale",
        subject="Hello {{ name }}",
        text="Our spring sale starts today.",
        recipients=[{"address": "kunde@example.com", "variables": {"name": "Kunde"}}],
        actor_user=admin,
    )
    broadcast_approve(
        tenant=tenant_a,
        broadcast_id=broadcast.pk,
        content_hash=broadcast.content_hash,
        actor=admin,
    )
    broadcast_pause(tenant=tenant_a, broadcast_id=broadcast.pk, actor=admin)
    broadcast_cancel(tenant=tenant_a, broadcast_id=broadcast.pk, actor=admin, reason="wrong list")
    return admin, broadcast


@pytest.mark.django_db
def test_a_broadcasts_rows_say_who_did_what_to_which_broadcast(
    tenant_a, broadcast_story, signed_in
):
    admin, broadcast = broadcast_story
    client = signed_in(admin)

    sentences = _sentences(client, tenant_a)
    html = client.get(reverse("admin_audit", args=[tenant_a.slug])).content.decode()

    assert sentences[:4] == [
        "Ana Admin cancelled the broadcast Spring sale",
        "Ana Admin paused the broadcast Spring sale",
        "Ana Admin approved the broadcast Spring sale",
        "Ana Admin created the broadcast Spring sale",
    ]
    link = reverse("broadcast", args=[tenant_a.slug, broadcast.pk])
    assert html.count(f'<a href="{link}">Spring sale</a>') == 4
    assert not any("Someone" in s or "created," in s for s in sentences)


@pytest.mark.django_db
def test_a_broadcasts_rows_read_in_german(tenant_a, broadcast_story, signed_in):
    admin, _ = broadcast_story
    admin.language = "de"
    admin.save(update_fields=["language"])

    sentences = _sentences(signed_in(admin), tenant_a)

    assert sentences[:4] == [
        "Ana Admin hat die Rundsendung Spring sale abgebrochen",
        "Ana Admin hat die Rundsendung Spring sale pausiert",
        "Ana Admin hat die Rundsendung Spring sale freigegeben",
        "Ana Admin hat die Rundsendung Spring sale erstellt",
    ]


@pytest.mark.django_db
def test_details_name_the_holder_and_leave_out_the_notes_id(
    tenant_a, member_of, mailbox_factory, signed_in
):
    """A draft taken and noted: the details say who holds it, not "holder 1", and no note id."""
    admin = member_of(tenant_a, "admin", user__full_name="Ana Admin").user
    draft = draft_create(
        tenant=tenant_a,
        mailbox=mailbox_factory(tenant_a),
        to=["kunde@example.com"],
        subject="Your order",
        text="It ships today.",
        actor_user=admin,
    )
    draft_take(tenant=tenant_a, draft_id=draft.pk, actor=admin)
    draft_note_add(tenant=tenant_a, draft_id=draft.pk, author=admin, text="Checked the order.")
    html = signed_in(admin).get(reverse("admin_audit", args=[tenant_a.slug])).content.decode()
    taken = re.search(r'data-action="draft.taken".*?</tr>', html, flags=re.S).group(0)
    noted = re.search(r'data-action="draft.note_added".*?</tr>', html, flags=re.S).group(0)

    assert "<dt>holder</dt><dd>Ana Admin</dd>" in taken
    assert "note id" not in noted
    assert f"<dd>{admin.pk}</dd>" not in taken
