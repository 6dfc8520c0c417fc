"""spin on the send protocol model (model/send_protocol.pml): the small configuration holds every
invariant, and removing any one guard gives a counterexample. ``make modelcheck`` runs the full
configurations (RELIABILITY.md "Model checking")."""

from __future__ import annotations

import os

import pytest

from model import run


def require_spin(environ=os.environ) -> None:
    """Skip where spin (or gcc) is missing, except in CI (.ci/run sets CI=true and installs it):
    there a missing spin fails, so a run cannot pass with the model unchecked."""
    if run.spin_available():
        return
    if environ.get("CI", "").strip().lower() in {"1", "true", "yes"}:
        pytest.fail("CI is set but spin or gcc is missing: the model cannot be checked")
    pytest.skip("spin (Debian's spin package) or gcc is not installed")


@pytest.fixture(autouse=True)
def spin_present():
    require_spin()


def _mutant(macro: str) -> run.Result:
    return run.check(
        {**run.SMALL, macro: None},
        label=macro,
        depth=run.MUTANT_DEPTH,
        time_limit=30,
        optimize="-O0",
    )


def _failed_assertion(result: run.Result) -> str:
    for line in result.trail.splitlines():
        if "text of failed assertion" in line:
            return line.split(":", 2)[-1].strip()
    return ""


def test_small_configuration_holds_every_invariant():
    result = run.check(run.SMALL, label="small", depth=run.SMALL_DEPTH)
    assert result.errors == 0, result.trail or result.output
    assert result.states > 100_000  # it did explore: a model that cannot move would pass too


@pytest.mark.parametrize(
    ("macro", "assertion"),
    [
        # a worker whose lease was taken over records its answer anyway
        ("NO_FENCE", "assert((tok==(w+1)))"),
        # the stored version changed after approval and the pre-call check did not notice
        ("NO_HASH_CHECK", "assert(kok[k])"),
        # the approver lost the right before the check and the check did not look
        ("NO_RIGHT_CHECK", "assert(kok[k])"),
        # a reconciliation with a fresh key: the provider cannot dedupe, a second send
        ("NO_SAME_KEY", "assert((sends<=1))"),
    ],
)
def test_removing_a_guard_gives_a_counterexample(macro, assertion):
    result = _mutant(macro)
    assert result.errors >= 1, result.output
    assert _failed_assertion(result) == assertion, result.trail[-3000:]


def test_the_known_limit_without_the_23_hour_stop_is_a_double_send():
    """The provider forgets a key 24 h after the send; a worker that still replays after that
    sends a second time. The 23 h stop (minus the allowed skew) is what prevents it."""
    result = _mutant("NO_WINDOW")
    assert result.errors >= 1, result.output
    # Same key, two sends: the per-key check is the first to fail.
    assert _failed_assertion(result) == "assert((ksends[k]<=1))", result.trail[-3000:]
    # The trail shows the provider forgetting the key: a completed key became unseen again.
    assert "(kdone[k]+" in result.trail


def test_a_pause_of_hours_between_check_and_call_is_a_double_send():
    """The margin between 23 h and 24 h also assumes a worker does not stall for hours between its
    pre-call check and its call (RELIABILITY.md "Model checking", assumptions)."""
    result = _mutant("LONG_PAUSE")
    assert result.errors >= 1, result.output
    assert _failed_assertion(result) == "assert((ksends[k]<=1))", result.trail[-3000:]


@pytest.mark.timeout(420)
def test_every_run_ends_terminal_or_in_needs_attention():
    """Liveness under weak fairness (pan -a -f), exhaustive for the fault-free configuration.
    The search takes about 11 s of CPU (437,000 states); the time limit only stops a runaway
    search, with room for a machine whose two cores the rest of the suite shares: under load it
    once reached only 194,000 states in 60 s of wall time."""
    result = run.check(run.LIVE, label="live", liveness=True, time_limit=300)
    assert result.errors == 0, result.trail[-3000:] or result.output
    assert result.complete and result.states > 100_000


def test_retrying_a_failing_lookup_for_ever_breaks_liveness():
    """reconcile.py hands an intent whose label lookups keep failing to a person after 2 x max
    attempts; without that, spin finds a fair cycle in which it stays uncertain."""
    result = run.check(
        {**run.LIVE, "NO_GIVE_UP": None}, label="NO_GIVE_UP", liveness=True, time_limit=30
    )
    assert result.errors >= 1, result.output
    assert "acceptance cycle" in result.output, result.output[-2000:]


def test_a_request_still_in_progress_can_land_after_a_person_cancels():
    """A known limit, shown on purpose: the worker dies while its request is in progress at the
    provider, the lookup finds nothing yet, a person cancels the needs-attention intent, then the
    provider completes the send (RELIABILITY.md "Model checking")."""
    result = _mutant("LATE_SEND_CHECK")
    assert result.errors >= 1, result.output
    assert "st = cancelled" in result.trail and "needs_attention" in result.trail
