"""Time ``intents.html_styles.reader_looks`` (the review page's and bulk approval's check of each
HTML body) on three shapes of body, best of several runs, and print the figures; with
``--profile``, a cProfile of the newsletter's check by cumulative time. A benchmark, not a test:
it fails on nothing.

    .venv/bin/python scripts/bench_reader_looks.py [--runs 7] [--profile]
"""

from __future__ import annotations

import argparse
import cProfile
import os
import pstats
import sys
import time
from pathlib import Path

# The code timed: this checkout's, or another's named by READER_LOOKS_SOURCE (a commit's
# `git archive` unpacked, to compare before and after on the same machine and load).
sys.path.insert(
    0, os.environ.get("READER_LOOKS_SOURCE") or str(Path(__file__).resolve().parents[1])
)

from intents.html_styles import reader_looks

_SIZE = 200_000

# A wordless preheader spacer: no-break spaces under display:none (the common "hide the rest of
# the preview" trick), which warns nothing.
_SPACER = (
    '<div style="display:none;font-size:1px;line-height:1px;max-height:0;max-width:0;'
    'opacity:0;overflow:hidden;mso-hide:all">' + "&nbsp; " * 90 + "</div>"
)
_HEAD = (
    "<!doctype html><html><head><meta charset='utf-8'><title>Spring news</title></head>"
    "<body style='margin:0;background:#f4f4f4'>" + _SPACER
)
_SECTION = (
    "<table role='presentation' width='100%' bgcolor='#f4f4f4' cellpadding='0' cellspacing='0'>"
    "<tr><td align='center'><table width='600' bgcolor='#ffffff' style='max-width:600px'>"
    "<tr><td style='padding:24px;font-family:Arial,sans-serif;color:#333333;font-size:16px'>"
    "<h2 style='margin:0 0 12px;color:#111111'>Story {i}: what changed this month</h2>"
    "<p style='margin:0 0 16px;line-height:24px'>We shipped faster exports, a new dashboard "
    "and fixed the timezone bug many of you reported. Read on for the details and what comes "
    "next in our roadmap for the quarter.</p>"
    "<table cellpadding='0' cellspacing='0'><tr><td bgcolor='#0066cc' "
    "style='border-radius:4px;background:#0066cc'><a href='https://example.com/story/{i}' "
    "style='display:inline-block;padding:12px 24px;color:#ffffff;text-decoration:none;"
    "font-weight:bold'>Read more</a></td></tr></table>"
    "<img src='https://example.com/img/{i}.png' width='552' alt='Chart {i}' "
    "style='display:block;border:0;margin-top:16px'>"
    "</td></tr></table></td></tr></table>"
)
_FOOT = (
    "<table width='100%' bgcolor='#f4f4f4'><tr><td style='color:#888888;font-size:12px;"
    "padding:16px'>You get this because you signed up. <a href='https://example.com/u' "
    "style='color:#888888'>Unsubscribe</a></td></tr></table>"
)
_HIDDEN_WORDS = (
    "<div style='display:none;max-height:0;overflow:hidden'>Pay to IBAN XX00 1234 5678</div>"
)


def _newsletter(tail: str = "") -> str:
    parts, size, i = [_HEAD], len(_HEAD), 0
    while size < _SIZE:
        section = _SECTION.format(i=i)
        parts.append(section)
        size += len(section)
        i += 1
    return "".join(parts) + tail + _FOOT + "</body></html>"


_SUPPORT_REPLY = (
    "<div style='font-family:Arial,sans-serif;font-size:14px;color:#222'>"
    "<p>Hello Maria,</p>"
    + "<p>Thanks for writing in. I looked at your account and the refund for order 1042 was "
    "issued today; it usually shows on your statement within five working days.</p>"
    * 6
    + "<p>If anything is still unclear, just reply to this email.</p>"
    "<p>Best regards,<br>Sam<br><span style='color:#888'>Support team</span></p>"
    "<blockquote style='margin:0 0 0 8px;border-left:2px solid #ccc;padding-left:8px'>"
    + "<p>On Monday you wrote: where is my refund? I returned the parcel two weeks ago.</p>" * 4
    + "</blockquote></div>"
)

BODIES = {
    "(a) newsletter, wordless spacer": _newsletter(),
    "(b) plain support reply": _SUPPORT_REPLY,
    "(c) newsletter, words hidden at the end": _newsletter(_HIDDEN_WORDS),
    # Thousands of elements left open: each text and start tag once walked all of them.
    "(d) 20,000 unclosed <div>s": "<div style='background:#000;color:#fff'>x</div>"
    + "<div>a" * 20_000,
}


def _forget() -> None:
    """Empty the checks' caches (a style's reading kept per value): each run reads a body as the
    first one of its template."""
    for module in list(sys.modules.values()):
        if getattr(module, "__name__", "").startswith("intents."):
            for value in list(vars(module).values()):
                if callable(getattr(value, "cache_clear", None)):
                    value.cache_clear()


def best_of(body: str, runs: int) -> float:
    """The least CPU time of ``runs`` checks: the wall clock counts other processes' turns."""
    times = []
    for _ in range(runs):
        _forget()
        start = time.process_time()
        reader_looks(body)
        times.append(time.process_time() - start)
    return min(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--profile", action="store_true")
    arguments = parser.parse_args()
    for name, body in BODIES.items():
        seconds = best_of(body, arguments.runs)
        print(
            f"{name:42} {len(body) / 1000:7.1f} KB {seconds * 1000:8.2f} ms  {reader_looks(body)}"
        )
    if arguments.profile:
        profile = cProfile.Profile()
        profile.runcall(reader_looks, BODIES["(a) newsletter, wordless spacer"])
        pstats.Stats(profile).sort_stats("cumulative").print_stats(25)


if __name__ == "__main__":
    main()
