"""Run spin on the send protocol model (model/send_protocol.pml) and report what it explored.

``python model/run.py`` (``make modelcheck``) runs the full configurations: 2 workers exhaustive
(safety), 2 workers with weak fairness (liveness), 3 workers as far as a time bound allows. Each
run compiles pan in a temporary directory, prints states, depth, memory and time, and the whole
command fails if any run finds an error trail. ``check()`` is what tests/model/ call.
"""

from __future__ import annotations

import argparse
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

MODEL = Path(__file__).resolve().parent / "send_protocol.pml"

# The suite's configuration: 2 workers, one fault, no undo window or not_after, a bounded search
# depth: about a second for the clean run. Mutants stop at their first counterexample, so they
# may search deeper.
SMALL = {"NW": 2, "MAXFAULTS": 1, "SMALL": None}
SMALL_DEPTH = 70
MUTANT_DEPTH = 150
# Liveness in the suite: the same without faults, exhaustive (a few seconds).
LIVE = {"NW": 2, "MAXFAULTS": 0, "MAXATT": 1, "SMALL": None}


@dataclass
class Result:
    label: str
    errors: int
    states: int
    depth: int
    memory_mb: float
    seconds: float
    complete: bool  # the whole state space (within the depth bound, if any) was explored
    output: str
    trail: str = ""
    notes: list[str] = field(default_factory=list)

    def summary(self) -> str:
        scope = "exhaustive" if self.complete else "bounded"
        return (
            f"{self.label}: errors {self.errors}, {self.states:,} states, depth {self.depth}, "
            f"{self.memory_mb:,.1f} MB, {self.seconds:.1f} s ({scope})"
        )


def spin_available() -> bool:
    return shutil.which("spin") is not None and shutil.which("gcc") is not None


def _defines(defines: dict) -> list[str]:
    return [f"-D{k}" if v is None else f"-D{k}={v}" for k, v in defines.items()]


def _number(pattern: str, text: str, cast=float, default=0):
    found = re.findall(pattern, text)
    return cast(found[-1]) if found else default


def _compile(
    work: Path, defines: dict, *, liveness: bool, collapse: bool, bitstate: bool, optimize: str
):
    """spin generates pan.c for these macros; gcc compiles it, in ``work``."""
    shutil.copy(MODEL, work / MODEL.name)
    subprocess.run(
        ["spin", *_defines(defines), "-a", MODEL.name], cwd=work, check=True, capture_output=True
    )
    cflags = [optimize, "-w", "-DVECTORSZ=4096"]
    if liveness:
        # weak fairness bookkeeping for every process: NW workers, 4 others, init, the claim
        cflags.append(f"-DNFAIR={int(defines.get('NW', 2)) + 6}")
    else:
        cflags += ["-DSAFETY", "-DNOCLAIM"]
    if collapse:
        cflags.append("-DCOLLAPSE")
    if bitstate:
        cflags.append("-DBITSTATE")
    subprocess.run(
        ["gcc", *cflags, "-o", "pan", "pan.c"], cwd=work, check=True, capture_output=True
    )


def _run_pan(work: Path, args: list[str], time_limit: float | None) -> tuple[str, bool, float]:
    """(pan's output, whether the time limit stopped it, seconds)."""
    started = time.monotonic()
    proc = subprocess.Popen(
        args, cwd=work, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    )
    stopped = False
    try:
        out, _ = proc.communicate(timeout=time_limit)
    except subprocess.TimeoutExpired:
        # pan prints its statistics when interrupted: the search so far is the bounded result.
        proc.send_signal(signal.SIGINT)
        out, _ = proc.communicate()
        stopped = True
    return out, stopped, time.monotonic() - started


def check(
    defines: dict | None = None,
    *,
    label: str = "run",
    depth: int = 2_000_000,
    liveness: bool = False,
    collapse: bool = False,
    bitstate: bool = False,
    hash_bits: int = 24,
    time_limit: float | None = None,
    optimize: str = "-O2",
) -> Result:
    """Compile and run pan for one configuration; returns what spin reported.

    ``optimize`` is gcc's level: -O2 compiles pan.c (350 kB of C) in about 3 s and pays for a long
    search; a search that stops at its first counterexample (a mutant) is over in about 2 s, which
    -O0 (0.5 s to compile) runs about as fast."""
    defines = dict(defines or {})
    with tempfile.TemporaryDirectory(prefix="modelcheck-") as tmp:
        work = Path(tmp)
        _compile(
            work,
            defines,
            liveness=liveness,
            collapse=collapse,
            bitstate=bitstate,
            optimize=optimize,
        )
        args = ["./pan", f"-m{depth}", f"-w{hash_bits}"]
        if liveness:
            args += ["-a", "-f"]
        out, stopped, seconds = _run_pan(work, args, time_limit)
        errors = _number(r"errors: (\d+)", out, int)
        if "states, stored" not in out or "pan: error" in out:
            # pan refused to run (a compile limit, a bad option): never a pass
            errors = max(errors, 1)
        trail = ""
        if errors and any(work.glob("*.trail")):
            trail = subprocess.run(
                ["spin", *_defines(defines), "-t", "-p", "-g", MODEL.name],
                cwd=work,
                capture_output=True,
                text=True,
            ).stdout
    notes = []
    truncated = "max search depth too small" in out
    if truncated:
        notes.append(f"depth bound {depth} reached")
    if stopped:
        notes.append(f"stopped after {time_limit:.0f} s")
    if bitstate:
        notes.append("bitstate (a hash-compacted partial search)")
    return Result(
        label=label,
        errors=errors,
        states=_number(r"([\d.e+]+) states, stored", out, lambda s: int(float(s))),
        depth=_number(r"depth reached (\d+)", out, int),
        memory_mb=_number(r"([\d.]+)\s+total actual memory usage", out),
        seconds=seconds,
        complete=not (truncated or stopped or bitstate),
        output=out,
        trail=trail,
        notes=notes,
    )


def full_runs(three_workers_seconds: float) -> list[tuple[str, dict, dict[str, Any]]]:
    return [
        (
            "2 workers, safety, exhaustive",
            {"NW": 2, "MAXFAULTS": 1},
            {"collapse": True, "hash_bits": 26},
        ),
        (
            "2 workers, liveness under weak fairness, no faults, exhaustive",
            {"NW": 2, "MAXFAULTS": 0},
            {"liveness": True, "collapse": True, "hash_bits": 26, "time_limit": 600},
        ),
        (
            "2 workers, liveness under weak fairness, one fault, no hold or not_after",
            {"NW": 2, "MAXFAULTS": 1, "SMALL": None},
            {"liveness": True, "collapse": True, "hash_bits": 26, "time_limit": 300},
        ),
        (
            f"3 workers, safety, bitstate, at most {three_workers_seconds:.0f} s",
            {"NW": 3, "MAXFAULTS": 1},
            {"bitstate": True, "hash_bits": 32, "time_limit": three_workers_seconds},
        ),
    ]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--small", action="store_true", help="only the suite's small run")
    parser.add_argument("--three-workers-seconds", type=float, default=300)
    parser.add_argument("-D", dest="defines", action="append", default=[], help="a model macro")
    options = parser.parse_args(argv)
    if not spin_available():
        print("modelcheck: spin and gcc are needed (Debian: apt-get install spin gcc)")
        return 2
    extra = dict(d.split("=", 1) if "=" in d else (d, None) for d in options.defines)
    runs: list[tuple[str, dict, dict[str, Any]]]
    if options.small:
        runs = [("small configuration", {**SMALL, **extra}, {"depth": SMALL_DEPTH})]
    else:
        runs = [
            (label, {**d, **extra}, kw) for label, d, kw in full_runs(options.three_workers_seconds)
        ]
    failed = False
    for label, defines, kwargs in runs:
        result = check(defines, label=label, **kwargs)
        notes = f" [{'; '.join(result.notes)}]" if result.notes else ""
        print(result.summary() + notes, flush=True)
        if result.errors:
            failed = True
            print(result.trail[-4000:] or result.output[-4000:])
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
