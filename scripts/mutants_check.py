"""`make mutants`, last step: every mutant that was not killed must be listed in docs/mutants.md as
equivalent, with its reason. Exits non-zero naming each unlisted survivor (and each listed one
that is now killed or gone, so the list stays true)."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

DOC = Path(__file__).resolve().parent.parent / "docs" / "mutants.md"
LISTED = re.compile(r"^- `([\w.]+__mutmut_\d+)`: \S")
RESULT = re.compile(r"^\s*([\w.]+__mutmut_\d+): (.+)$")


def main() -> int:
    out = subprocess.run(
        ["mutmut", "results", "--all", "true"], capture_output=True, text=True, check=True
    ).stdout
    status = {m.group(1): m.group(2).strip() for m in map(RESULT.match, out.splitlines()) if m}
    if not status:
        print("mutants: mutmut reported no mutants; did `mutmut run` succeed?")
        return 1
    listed = {m.group(1) for m in map(LISTED.match, DOC.read_text().splitlines()) if m}
    alive = {name for name, verdict in status.items() if verdict != "killed"}
    unlisted = sorted(alive - listed)
    stale = sorted(listed - alive)
    for name in unlisted:
        print(f"mutants: {name} {status[name]}: kill it with a test, or list it in {DOC.name}")
    for name in stale:
        print(
            f"mutants: {name} is listed as equivalent but was {status.get(name, 'not generated')}"
        )
    killed = sum(1 for verdict in status.values() if verdict == "killed")
    print(
        f"mutants: {len(status)} mutants, {killed} killed, {len(alive)} not killed (listed as equivalent: {len(alive & listed)})"
    )
    return 1 if unlisted or stale else 0


if __name__ == "__main__":
    sys.exit(main())
