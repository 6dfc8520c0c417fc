"""The send intent's state machine as data: the moves the code makes between different states
(DESIGN.md "Send intent lifecycle"). Moves that keep the state (hold, release, a reconciliation
to try later) are not listed.

tests/model/test_drift.py checks this table against the model (model/send_protocol.pml), against
``SendIntent.State`` and ``SendIntent.TERMINAL``, and against the ``from_state``/``to_state`` pairs
the services of ``intents/`` write to the journal. DESIGN.md also names ``queued -> blocked``; no
service makes that move (policy stops happen after the claim, from ``sending``).
"""

from __future__ import annotations

TRANSITIONS: dict[str, frozenset[str]] = {
    "queued": frozenset({"sending", "expired", "cancelled"}),
    "sending": frozenset({"accepted", "queued", "uncertain", "failed", "blocked"}),
    "uncertain": frozenset({"accepted", "needs_attention"}),
    "needs_attention": frozenset({"accepted", "cancelled"}),
    "accepted": frozenset(),
    "failed": frozenset(),
    "blocked": frozenset(),
    "expired": frozenset(),
    "cancelled": frozenset(),
}


def allowed(from_state: str, to_state: str) -> bool:
    """True when the table allows the move (a move that keeps the state always is)."""
    return from_state == to_state or to_state in TRANSITIONS.get(from_state, frozenset())
