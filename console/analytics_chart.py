"""The reviewer analytics chart as numbers for an inline SVG (no script, no chart library): one
bar per group, split by outcome in proportion to that group's decided drafts. The template draws
it; the table beside it carries the same figures for screen readers and for reading exactly."""

from __future__ import annotations

from dataclasses import dataclass

from django.utils.translation import gettext_lazy as _
from django.utils.translation import pgettext_lazy

from intents.selectors.analytics import Figures

# Okabe-Ito colours: told apart with the common colour-vision deficiencies.
OUTCOMES = (
    ("approved_unchanged", _("Approved unchanged"), "#009E73"),
    ("approved_edited", _("Approved after edits"), "#56B4E9"),
    ("rejected", pgettext_lazy("drafts", "Rejected"), "#D55E00"),
    ("expired", pgettext_lazy("drafts", "Expired"), "#999999"),
    ("withdrawn", pgettext_lazy("drafts", "Withdrawn"), "#E69F00"),
)
WIDTH = 640
LABEL_WIDTH = 160
BAR_HEIGHT = 22
ROW_HEIGHT = 32
MAX_BARS = 12


@dataclass
class Segment:
    x: float
    width: float
    colour: str
    title: str


@dataclass
class Bar:
    label: str
    y: int
    text_y: int
    segments: list[Segment]
    total: int


@dataclass
class Chart:
    width: int
    height: int
    label_width: int
    bar_height: int
    bars: list[Bar]
    legend: list[tuple[str, str]]


def outcome_chart(groups: list[Figures]) -> Chart:
    span = WIDTH - LABEL_WIDTH - 8
    bars = []
    for i, figures in enumerate(groups[:MAX_BARS]):
        x = float(LABEL_WIDTH)
        segments = []
        for name, label, colour in OUTCOMES:
            count = getattr(figures, name)
            if not count:
                continue
            width = span * count / figures.total
            title = f"{figures.label}: {label} {count}"
            segments.append(
                Segment(x=round(x, 1), width=round(width, 1), colour=colour, title=title)
            )
            x += width
        y = i * ROW_HEIGHT + 4
        bars.append(
            Bar(
                label=figures.label,
                y=y,
                text_y=y + BAR_HEIGHT // 2 + 5,
                segments=segments,
                total=figures.total,
            )
        )
    return Chart(
        width=WIDTH,
        height=max(len(bars), 1) * ROW_HEIGHT + 8,
        label_width=LABEL_WIDTH - 8,
        bar_height=BAR_HEIGHT,
        bars=bars,
        legend=[(str(label), colour) for _, label, colour in OUTCOMES],
    )
