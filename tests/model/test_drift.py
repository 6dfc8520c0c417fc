"""No silent drift between the model, the state table and the code: the model's states and its
marked transitions (``/* transition: a -> b */``) are exactly ``intents/states.py``, whose states
are exactly ``SendIntent.State``, and every state change the services of ``intents/`` write (a
journal row's from/to, a conditional UPDATE's ``filter(state=...).update(state=...)``) moves
along the table."""

from __future__ import annotations

import ast
import re
from pathlib import Path

from intents.models import SendIntent
from intents.states import TRANSITIONS, allowed

ROOT = Path(__file__).resolve().parents[2]
MODEL = ROOT / "model" / "send_protocol.pml"
STATE_NAMES = {value for value, _ in SendIntent.State.choices}
ENUM_NAMES = {member.name: member.value for member in SendIntent.State}


def model_transitions() -> set[tuple[str, str]]:
    return set(re.findall(r"/\* transition: (\w+) -> (\w+) \*/", MODEL.read_text()))


def table_transitions() -> set[tuple[str, str]]:
    return {(a, b) for a, targets in TRANSITIONS.items() for b in targets}


def test_the_model_states_are_the_intent_states():
    text = MODEL.read_text()
    mtype = re.search(r"^mtype = \{([^}]*)\};", text, re.MULTILINE)
    assert mtype, "the model's mtype declaration of the states is missing"
    assert {s.strip() for s in mtype.group(1).split(",")} == STATE_NAMES
    assert set(TRANSITIONS) == STATE_NAMES


def test_the_model_transitions_are_the_table():
    assert model_transitions() == table_transitions()


def test_the_terminal_states_are_those_without_a_way_out():
    assert {s for s, targets in TRANSITIONS.items() if not targets} == set(SendIntent.TERMINAL)


def _state_literal(node: ast.expr | None) -> str | None:
    """The value ("sending") of ``State.SENDING`` or ``SendIntent.State.SENDING``; None for anything else."""
    if isinstance(node, ast.Attribute) and node.attr in ENUM_NAMES:
        base = node.value
        if (isinstance(base, ast.Name) and base.id == "State") or (
            isinstance(base, ast.Attribute) and base.attr == "State"
        ):
            return ENUM_NAMES[node.attr]
    return None


def _keyword(call: ast.Call, name: str) -> ast.expr | None:
    return next((k.value for k in call.keywords if k.arg == name), None)


def code_moves() -> list[tuple[str, str | None, str]]:
    """(where, from state or None when not a literal, to state) for every literal move."""
    moves = []
    for path in sorted((ROOT / "intents").rglob("*.py")):
        if "migrations" in path.parts:
            continue
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            if not isinstance(node, ast.Call):
                continue
            where = f"{path.relative_to(ROOT)}:{node.lineno}"
            to_state = _state_literal(_keyword(node, "to_state"))
            if to_state:
                moves.append((where, _state_literal(_keyword(node, "from_state")), to_state))
            func = node.func
            if isinstance(func, ast.Attribute) and func.attr == "update":
                target = _state_literal(_keyword(node, "state"))
                inner = func.value
                if target and isinstance(inner, ast.Call):
                    moves.append((where, _state_literal(_keyword(inner, "state")), target))
    return moves


def test_every_move_the_code_writes_is_in_the_table():
    moves = code_moves()
    assert len(moves) > 15, moves  # the scan found the services' moves
    reachable = {b for _, b in table_transitions()} | {"queued"}  # approval creates queued
    wrong = [
        (where, a, b)
        for where, a, b in moves
        if (a is not None and not allowed(a, b)) or (a is None and b not in reachable)
    ]
    assert not wrong, wrong
    # Every transition of the table is made somewhere (or by a move whose source is computed).
    literal = {(a, b) for _, a, b in moves if a is not None and a != b}
    computed_targets = {b for _, a, b in moves if a is None}
    missing = {(a, b) for a, b in table_transitions() if (a, b) not in literal} - {
        (a, b) for a, b in table_transitions() if b in computed_targets
    }
    assert not missing, missing
