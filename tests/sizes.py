"""How big the heavy tests run: small in `make test` (the suite's 10-minute budget on two cores),
full through `make test-full` (COUNTERSIGN_TEST_SIZE=full), which runs the same tests with the
example counts and sizes they were written for. The small size is not a weaker test: the same
properties are checked, on fewer generated examples."""

from __future__ import annotations

import os

FULL = os.environ.get("COUNTERSIGN_TEST_SIZE", "").strip().lower() == "full"


def size(small: int, full: int) -> int:
    """`small` in the suite, `full` under `make test-full`."""
    return full if FULL else small
